#include "util/go_template.h"

#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace nvdra {
namespace {

using nlohmann::json;

// A value reference: ".", ".A.B", "$", "$x", "$x.A".
struct Expr {
  std::string var;                  // "" for dot, "$" for the root, "$x"
  std::vector<std::string> fields;  // then these fields, in order
};

struct Node;
using Body = std::vector<Node>;

struct Branch {
  Expr cond;
  Body body;
};

struct Node {
  enum class Type { kText, kValue, kIf, kRange } type = Type::kText;
  int line = 1;
  std::string text;                // kText
  Expr expr;                       // kValue, kRange
  std::vector<Branch> branches;    // kIf: if, else if ...
  Body body;                       // kRange
  Body else_body;                  // kIf, kRange
  std::string key_var, value_var;  // kRange
};

Node MakeNode(Node::Type type, int line, std::string text = "") {
  Node n;
  n.type = type;
  n.line = line;
  n.text = std::move(text);
  return n;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string> Words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    size_t start = i;
    while (i < s.size() && !IsSpace(s[i])) ++i;
    if (i > start) out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

// One {{ ... }} with the text before it.
struct Token {
  std::string text;    // literal text before the action (trimmed as asked)
  std::string action;  // the action's inside, trimmed; empty at the end
  int line = 1;        // where the action starts
  bool end = false;    // no action: the end of the template
};

class Parser {
 public:
  Parser(std::string_view name, std::string_view text) : name_(name), text_(text) {}

  Result<Body> Parse() {
    NVDRA_RETURN_IF_ERROR(Tokenize());
    std::string closer;
    NVDRA_ASSIGN_OR_RETURN(Body body, ParseBody(&closer));
    if (!closer.empty()) return Error(tokens_[pos_ - 1].line, "unexpected {{" + closer + "}}");
    return body;
  }

 private:
  Status Error(int line, const std::string& what) const {
    return InvalidArgument("template: " + name_ + ":" + std::to_string(line) + ": " + what);
  }

  Status Tokenize() {
    size_t i = 0;
    int line = 1;
    bool trim_next = false;
    for (;;) {
      size_t open = text_.find("{{", i);
      Token t;
      std::string_view literal = text_.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i);
      if (trim_next) {
        while (!literal.empty() && IsSpace(literal.front())) literal.remove_prefix(1);
      }
      for (char c : text_.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i)) {
        if (c == '\n') ++line;
      }
      if (open == std::string_view::npos) {
        t.text = std::string(literal);
        t.end = true;
        tokens_.push_back(std::move(t));
        return Status::Ok();
      }
      size_t inner = open + 2;
      if (inner + 1 < text_.size() && text_[inner] == '-' && IsSpace(text_[inner + 1])) {
        while (!literal.empty() && IsSpace(literal.back())) literal.remove_suffix(1);
        ++inner;
      }
      size_t close = text_.find("}}", inner);
      if (close == std::string_view::npos) return Error(line, "unclosed action");
      size_t inner_end = close;
      trim_next = false;
      if (inner_end > inner && text_[inner_end - 1] == '-' && inner_end - 1 > inner && IsSpace(text_[inner_end - 2])) {
        --inner_end;
        trim_next = true;
      }
      t.text = std::string(literal);
      t.action = std::string(Trim(text_.substr(inner, inner_end - inner)));
      t.line = line;
      for (size_t k = open; k < close; ++k) {
        if (text_[k] == '\n') ++line;
      }
      tokens_.push_back(std::move(t));
      i = close + 2;
    }
  }

  Result<Expr> ParseExpr(std::string_view s, int line) const {
    Expr e;
    std::string_view rest = s;
    if (rest.empty()) return Error(line, "missing value");
    if (rest.front() == '$') {
      size_t dot = rest.find('.');
      e.var = std::string(rest.substr(0, dot));
      rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot);
    } else if (rest.front() != '.') {
      return Error(line, "unsupported action \"" + std::string(s) + "\" (only values, if, else, range and end)");
    }
    if (rest == ".") return e;
    while (!rest.empty()) {
      if (rest.front() != '.') return Error(line, "bad value \"" + std::string(s) + "\"");
      rest.remove_prefix(1);
      size_t next = rest.find('.');
      std::string field(rest.substr(0, next));
      if (field.empty()) return Error(line, "bad value \"" + std::string(s) + "\"");
      for (char c : field) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
          return Error(line, "unsupported action \"" + std::string(s) + "\" (only values, if, else, range and end)");
        }
      }
      e.fields.push_back(std::move(field));
      rest = next == std::string_view::npos ? std::string_view() : rest.substr(next);
    }
    return e;
  }

  // Parses until {{end}} or {{else...}} (returned in `closer`) or the end.
  Result<Body> ParseBody(std::string* closer) {
    Body body;
    while (pos_ < tokens_.size()) {
      const Token& t = tokens_[pos_++];
      if (!t.text.empty()) body.push_back(MakeNode(Node::Type::kText, t.line, t.text));
      if (t.end) {
        closer->clear();
        return body;
      }
      if (t.action.rfind("/*", 0) == 0) {
        if (t.action.size() < 4 || t.action.substr(t.action.size() - 2) != "*/")
          return Error(t.line, "unclosed comment");
        continue;
      }
      std::vector<std::string> w = Words(t.action);
      if (w.empty()) return Error(t.line, "missing value for command");
      if (w[0] == "end" || w[0] == "else") {
        *closer = t.action;
        return body;
      }
      if (w[0] == "if") {
        NVDRA_ASSIGN_OR_RETURN(Node n, ParseIf(t));
        body.push_back(std::move(n));
      } else if (w[0] == "range") {
        NVDRA_ASSIGN_OR_RETURN(Node n, ParseRange(t, w));
        body.push_back(std::move(n));
      } else {
        if (w.size() != 1) {
          return Error(t.line, "unsupported action \"" + t.action + "\" (only values, if, else, range and end)");
        }
        Node n = MakeNode(Node::Type::kValue, t.line);
        NVDRA_ASSIGN_OR_RETURN(n.expr, ParseExpr(w[0], t.line));
        body.push_back(std::move(n));
      }
    }
    closer->clear();
    return body;
  }

  Result<Node> ParseIf(const Token& t) {
    Node n = MakeNode(Node::Type::kIf, t.line);
    std::vector<std::string> w = Words(t.action);
    for (;;) {
      if (w.size() != 2) return Error(t.line, "unsupported condition \"" + t.action + "\" (one value)");
      Branch b;
      NVDRA_ASSIGN_OR_RETURN(b.cond, ParseExpr(w[1], t.line));
      std::string closer;
      NVDRA_ASSIGN_OR_RETURN(b.body, ParseBody(&closer));
      n.branches.push_back(std::move(b));
      std::vector<std::string> c = Words(closer);
      if (c.empty()) return Error(t.line, "unexpected EOF: {{if}} without {{end}}");
      if (c[0] == "end" && c.size() == 1) return n;
      if (c[0] == "else" && c.size() == 1) {
        NVDRA_ASSIGN_OR_RETURN(n.else_body, ParseBody(&closer));
        if (closer != "end") return Error(t.line, "{{else}} of {{if}} must end with {{end}}");
        return n;
      }
      if (c[0] == "else" && c.size() >= 2 && c[1] == "if") {
        w.assign(c.begin() + 1, c.end());
        continue;
      }
      return Error(t.line, "unexpected {{" + closer + "}} in {{if}}");
    }
  }

  Result<Node> ParseRange(const Token& t, const std::vector<std::string>& w) {
    Node n = MakeNode(Node::Type::kRange, t.line);
    std::string target;
    if (w.size() == 2) {
      target = w[1];
    } else if (w.size() == 4 && w[2] == ":=") {
      n.value_var = w[1];
      target = w[3];
    } else if (w.size() == 5 && w[1].size() > 1 && w[1].back() == ',' && w[3] == ":=") {
      n.key_var = w[1].substr(0, w[1].size() - 1);
      n.value_var = w[2];
      target = w[4];
    } else {
      return Error(t.line, "unsupported range \"" + t.action + "\"");
    }
    for (const auto& v : {n.key_var, n.value_var}) {
      if (!v.empty() && (v.size() < 2 || v[0] != '$')) return Error(t.line, "bad range variable \"" + v + "\"");
    }
    NVDRA_ASSIGN_OR_RETURN(n.expr, ParseExpr(target, t.line));
    std::string closer;
    NVDRA_ASSIGN_OR_RETURN(n.body, ParseBody(&closer));
    if (closer == "else") {
      NVDRA_ASSIGN_OR_RETURN(n.else_body, ParseBody(&closer));
    }
    if (closer != "end") return Error(t.line, "unexpected EOF: {{range}} without {{end}}");
    return n;
  }

  std::string name_;
  std::string_view text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

class Renderer {
 public:
  Renderer(std::string_view name, const json& root) : name_(name), root_(root) {}

  Status Render(const Body& body, const json& dot, std::map<std::string, json>& vars, std::string& out) const {
    for (const Node& n : body) NVDRA_RETURN_IF_ERROR(RenderNode(n, dot, vars, out));
    return Status::Ok();
  }

 private:
  Status Error(int line, const std::string& what) const {
    return InvalidArgument("template: " + name_ + ":" + std::to_string(line) + ": " + what);
  }

  Result<json> Eval(const Expr& e, const json& dot, const std::map<std::string, json>& vars, int line) const {
    const json* cur = &dot;
    if (e.var == "$") {
      cur = &root_;
    } else if (!e.var.empty()) {
      auto it = vars.find(e.var);
      if (it == vars.end()) return Error(line, "undefined variable: " + e.var);
      cur = &it->second;
    }
    for (const auto& f : e.fields) {
      if (cur->is_null()) return json();
      if (!cur->is_object() || !cur->contains(f)) return Error(line, "can't evaluate field " + f);
      cur = &cur->at(f);
    }
    return *cur;
  }

  static bool Truth(const json& v) {
    if (v.is_null()) return false;
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number_integer()) return v.get<int64_t>() != 0;
    if (v.is_number_unsigned()) return v.get<uint64_t>() != 0;
    if (v.is_number_float()) return v.get<double>() != 0;
    if (v.is_string()) return !v.get_ref<const std::string&>().empty();
    return !v.empty();
  }

  static std::string Print(const json& v) {
    if (v.is_null()) return "<no value>";
    if (v.is_string()) return v.get<std::string>();
    return v.dump();
  }

  Status RenderNode(const Node& n, const json& dot, std::map<std::string, json>& vars, std::string& out) const {
    switch (n.type) {
      case Node::Type::kText: out += n.text; return Status::Ok();
      case Node::Type::kValue: {
        NVDRA_ASSIGN_OR_RETURN(json v, Eval(n.expr, dot, vars, n.line));
        out += Print(v);
        return Status::Ok();
      }
      case Node::Type::kIf:
        for (const Branch& b : n.branches) {
          NVDRA_ASSIGN_OR_RETURN(json v, Eval(b.cond, dot, vars, n.line));
          if (Truth(v)) return Render(b.body, dot, vars, out);
        }
        return Render(n.else_body, dot, vars, out);
      case Node::Type::kRange: return RenderRange(n, dot, vars, out);
    }
    return Status::Ok();
  }

  Status RenderRange(const Node& n, const json& dot, std::map<std::string, json>& vars, std::string& out) const {
    NVDRA_ASSIGN_OR_RETURN(json v, Eval(n.expr, dot, vars, n.line));
    if (!v.is_null() && !v.is_array() && !v.is_object()) return Error(n.line, "range can't iterate over " + v.dump());
    if (!Truth(v)) return Render(n.else_body, dot, vars, out);
    // nlohmann's objects iterate in key order, as Go ranges over a map.
    size_t index = 0;
    for (auto it = v.begin(); it != v.end(); ++it, ++index) {
      std::map<std::string, json> scope = vars;
      json key = v.is_object() ? json(it.key()) : json(index);
      if (!n.key_var.empty()) scope[n.key_var] = key;
      if (!n.value_var.empty()) scope[n.value_var] = *it;
      NVDRA_RETURN_IF_ERROR(Render(n.body, *it, scope, out));
    }
    return Status::Ok();
  }

  std::string name_;
  const json& root_;
};

}  // namespace

Result<std::string> RenderGoTemplate(std::string_view name, std::string_view text, const nlohmann::json& data) {
  Parser parser(name, text);
  NVDRA_ASSIGN_OR_RETURN(Body body, parser.Parse());
  std::string out;
  std::map<std::string, json> vars;
  NVDRA_RETURN_IF_ERROR(Renderer(name, data).Render(body, data, vars, out));
  return out;
}

}  // namespace nvdra
