#include "config/config_walker.h"

#include "util/parse_number.h"

namespace nvdra::config::fields {
namespace {

using Type = JsonValue::Type;

}  // namespace

void String(ConfigWalker& w, const JsonValue& v, std::string& out, std::string_view go_type) {
  if (v.type == Type::kNull) return;
  if (v.type != Type::kString) {
    w.TypeError(v, go_type);
    return;
  }
  out = v.text;
}

void OptString(ConfigWalker& w, const JsonValue& v, std::optional<std::string>& out, std::string_view go_type) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  if (v.type != Type::kString) {
    w.TypeError(v, go_type);
    return;
  }
  out = v.text;
}

void OptInt(ConfigWalker& w, const JsonValue& v, std::optional<int64_t>& out) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  Result<int64_t> n = v.type == Type::kNumber && v.is_integer ? ParseInt64(v.text)
                                                              : Result<int64_t>(InvalidArgument("not an integer"));
  if (!n.ok()) {
    // Beyond int64 too: Go reports an overflow with the same message.
    w.TypeError(v, "int");
    return;
  }
  out = *n;
}

void OptBool(ConfigWalker& w, const JsonValue& v, std::optional<bool>& out) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  if (v.type != Type::kBool) {
    w.TypeError(v, "bool");
    return;
  }
  out = v.boolean;
}

// resource.Quantity accepts a JSON string or a bare number.
std::optional<Quantity> ParseQuantityValue(ConfigWalker& w, const JsonValue& v) {
  if (v.type != Type::kString && v.type != Type::kNumber) {
    if (w.strict())
      w.Fatal("invalid quantity at \"" + w.Path() + "\": expected a string such as \"10Gi\", got " +
              std::string(v.TypeName()));
    return std::nullopt;
  }
  auto q = Quantity::Parse(v.text);
  if (!q.ok()) {
    if (w.strict()) w.Fatal("invalid quantity \"" + v.text + "\" at \"" + w.Path() + "\": " + q.status().message());
    return std::nullopt;
  }
  return *q;
}

void OptQuantity(ConfigWalker& w, const JsonValue& v, std::optional<Quantity>& out) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  if (auto q = ParseQuantityValue(w, v)) out = *q;
}

bool ExpectObject(ConfigWalker& w, const JsonValue& v, std::string_view go_type) {
  if (v.type == Type::kObject) return true;
  if (v.type != Type::kNull) w.TypeError(v, go_type);
  return false;
}

std::vector<ConfigWalker::Field> TypeMetaFields(ConfigWalker& w) {
  return {{"apiVersion",
           [&w](const JsonValue& x) {
             std::string ignored;
             String(w, x, ignored);
           }},
          {"kind", [&w](const JsonValue& x) {
             std::string ignored;
             String(w, x, ignored);
           }}};
}

}  // namespace nvdra::config::fields
