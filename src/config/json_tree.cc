#include "config/json_tree.h"

#include <nlohmann/json.hpp>

namespace nvdra::config {
namespace {

// Builds a JsonValue tree from nlohmann's SAX events. nlohmann's SAX driver
// is iterative, and this handler keeps an explicit stack, so hostile nesting
// can only hit the depth limit, never the C++ stack.
class TreeBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit TreeBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() override { return Add(JsonValue{}); }
  bool boolean(bool v) override {
    JsonValue j;
    j.type = JsonValue::Type::kBool;
    j.boolean = v;
    return Add(std::move(j));
  }
  bool number_integer(number_integer_t v) override { return AddNumber(std::to_string(v), true); }
  bool number_unsigned(number_unsigned_t v) override {
    return AddNumber(std::to_string(v), v <= static_cast<number_unsigned_t>(INT64_MAX));
  }
  bool number_float(number_float_t, const string_t& raw) override { return AddNumber(raw, false); }
  bool string(string_t& v) override {
    JsonValue j;
    j.type = JsonValue::Type::kString;
    j.text = std::move(v);
    return Add(std::move(j));
  }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return Open(JsonValue::Type::kObject); }
  bool key(string_t& k) override {
    stack_.back()->members.push_back(JsonMember{std::move(k), JsonValue{}});
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return Open(JsonValue::Type::kArray); }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag: users need the
    // position and reason, not the library's error id.
    if (auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos) {
      what = what.substr(pos + 2);
    }
    error_ = "json parse error: " + what;
    return false;
  }

  JsonValue TakeRoot() { return std::move(root_); }
  const std::string& error() const { return error_; }

 private:
  bool AddNumber(std::string text, bool is_integer) {
    JsonValue j;
    j.type = JsonValue::Type::kNumber;
    j.text = std::move(text);
    j.is_integer = is_integer;
    return Add(std::move(j));
  }

  // Places `v` where the grammar says it goes and returns its address.
  JsonValue* Place(JsonValue v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    JsonValue* top = stack_.back();
    if (top->type == JsonValue::Type::kArray) {
      top->elements.push_back(std::move(v));
      return &top->elements.back();
    }
    top->members.back().second = std::move(v);
    return &top->members.back().second;
  }

  bool Add(JsonValue v) {
    Place(std::move(v));
    return true;
  }

  bool Open(JsonValue::Type type) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      error_ = "json parse error: nesting is deeper than " + std::to_string(max_depth_) + " levels";
      return false;
    }
    JsonValue v;
    v.type = type;
    stack_.push_back(Place(std::move(v)));
    return true;
  }

  int max_depth_;
  JsonValue root_;
  std::vector<JsonValue*> stack_;
  std::string error_;
};

}  // namespace

std::string_view JsonValue::TypeName() const {
  switch (type) {
    case Type::kNull: return "null";
    case Type::kBool: return "bool";
    case Type::kNumber: return "number";
    case Type::kString: return "string";
    case Type::kArray: return "array";
    case Type::kObject: return "object";
  }
  return "value";
}

Result<JsonValue> ParseJson(std::string_view text, const JsonParseLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return InvalidArgument("json parse error: document is " + std::to_string(text.size()) + " bytes, more than the " +
                           std::to_string(limits.max_bytes) + " bytes accepted");
  }
  TreeBuilder builder(limits.max_depth);
  bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &builder);
  if (!ok) {
    return InvalidArgument(builder.error().empty() ? "json parse error" : builder.error());
  }
  return builder.TakeRoot();
}

}  // namespace nvdra::config
