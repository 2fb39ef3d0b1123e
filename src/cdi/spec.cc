#include "cdi/spec.h"

#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

namespace nvdra::cdi {

namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsLetter(c) || IsDigit(c); }

bool NameMatches(const std::string& s, bool first_may_be_digit, const std::string& extra) {
  // Old CDI libraries index the first and last character separately and
  // crash on single-character names, so we require two.
  if (s.size() < 2) return false;
  if (!(IsLetter(s.front()) || (first_may_be_digit && IsDigit(s.front())))) return false;
  if (!IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && extra.find(c) == std::string::npos) return false;
  }
  return true;
}

bool EditsNeedHostPath(const ContainerEdits& e) {
  for (const auto& n : e.device_nodes) {
    if (!n.host_path.empty()) return true;
  }
  return false;
}

bool EditsNeedMountType(const ContainerEdits& e) {
  for (const auto& m : e.mounts) {
    if (!m.type.empty()) return true;
  }
  return false;
}

// `what` and `name` say where, in errors (built only for one: this runs
// for every claim's spec).
Status ValidateEdits(const ContainerEdits& e, const char* what, const std::string& name) {
  auto where = [&] { return what + name; };
  for (const auto& env : e.env) {
    if (env.empty() || env.find('=') == std::string::npos || env.front() == '=') {
      return InvalidArgument(where() + ": environment entry \"" + env + "\" is not KEY=VALUE");
    }
  }
  for (const auto& n : e.device_nodes) {
    if (n.path.empty() || n.path.front() != '/') {
      return InvalidArgument(where() + ": device node path \"" + n.path + "\" is not absolute");
    }
    if (!n.host_path.empty() && n.host_path.front() != '/') {
      return InvalidArgument(where() + ": device node hostPath \"" + n.host_path + "\" is not absolute");
    }
    if (!n.type.empty() && n.type != "c" && n.type != "b" && n.type != "u" && n.type != "p") {
      return InvalidArgument(where() + ": device node " + n.path + " has invalid type \"" + n.type + "\"");
    }
    if ((n.type == "p") && (n.major || n.minor)) {
      return InvalidArgument(where() + ": fifo device node " + n.path + " must not have major/minor");
    }
    for (char c : n.permissions) {
      if (c != 'r' && c != 'w' && c != 'm') {
        return InvalidArgument(where() + ": device node " + n.path + " has invalid permissions \"" + n.permissions +
                               "\"");
      }
    }
  }
  for (const auto& m : e.mounts) {
    if (m.host_path.empty() || m.container_path.empty() || m.container_path.front() != '/') {
      return InvalidArgument(where() + ": mount " + m.host_path + " -> " + m.container_path +
                             " needs a host path and an absolute container path");
    }
  }
  for (const auto& h : e.hooks) {
    if (h.hook_name.empty() || h.path.empty()) {
      return InvalidArgument(where() + ": hook needs hookName and path");
    }
    // The OCI lifecycle names every CDI version knows (hooks need no
    // version above the 0.3.0 baseline).
    static const char* const kHookNames[] = {"prestart",       "createRuntime", "createContainer",
                                             "startContainer", "poststart",     "poststop"};
    bool known = false;
    for (const char* n : kHookNames) known = known || h.hook_name == n;
    if (!known) return InvalidArgument(where() + ": hook " + h.path + " has invalid hookName \"" + h.hook_name + "\"");
    if (h.path.front() != '/') return InvalidArgument(where() + ": hook path \"" + h.path + "\" is not absolute");
    for (const auto& env : h.env) {
      if (env.find('=') == std::string::npos || env.front() == '=') {
        return InvalidArgument(where() + ": hook environment entry \"" + env + "\" is not KEY=VALUE");
      }
    }
  }
  return Status::Ok();
}

using ordered_json = nlohmann::ordered_json;

ordered_json EditsToJson(const ContainerEdits& e) {
  ordered_json j = ordered_json::object();
  if (!e.env.empty()) j["env"] = e.env;
  if (!e.device_nodes.empty()) {
    ordered_json nodes = ordered_json::array();
    for (const auto& n : e.device_nodes) {
      ordered_json d = ordered_json::object();
      d["path"] = n.path;
      if (!n.host_path.empty()) d["hostPath"] = n.host_path;
      if (!n.type.empty()) d["type"] = n.type;
      if (n.major) d["major"] = *n.major;
      if (n.minor) d["minor"] = *n.minor;
      // os.FileMode in Go's JSON is a plain integer.
      if (n.file_mode) d["fileMode"] = *n.file_mode;
      if (!n.permissions.empty()) d["permissions"] = n.permissions;
      nodes.push_back(std::move(d));
    }
    j["deviceNodes"] = std::move(nodes);
  }
  if (!e.hooks.empty()) {
    ordered_json hooks = ordered_json::array();
    for (const auto& h : e.hooks) {
      ordered_json d = ordered_json::object();
      d["hookName"] = h.hook_name;
      d["path"] = h.path;
      if (!h.args.empty()) d["args"] = h.args;
      if (!h.env.empty()) d["env"] = h.env;
      if (h.timeout) d["timeout"] = *h.timeout;
      hooks.push_back(std::move(d));
    }
    j["hooks"] = std::move(hooks);
  }
  if (!e.mounts.empty()) {
    ordered_json mounts = ordered_json::array();
    for (const auto& m : e.mounts) {
      ordered_json d = ordered_json::object();
      d["hostPath"] = m.host_path;
      d["containerPath"] = m.container_path;
      if (!m.options.empty()) d["options"] = m.options;
      if (!m.type.empty()) d["type"] = m.type;
      mounts.push_back(std::move(d));
    }
    j["mounts"] = std::move(mounts);
  }
  return j;
}

}  // namespace

bool IsValidVendorName(const std::string& vendor) { return NameMatches(vendor, false, "_-."); }
bool IsValidClassName(const std::string& cls) { return NameMatches(cls, false, "_-"); }
bool IsValidDeviceName(const std::string& name) { return NameMatches(name, true, "_-.:"); }

bool operator==(const Spec& a, const Spec& b) {
  if (a.kind != b.kind || a.devices != b.devices) return false;
  if (a.shared_edits == b.shared_edits) return a.edits == b.edits;
  return SpecLevelEdits(a) == SpecLevelEdits(b);
}

ContainerEdits SpecLevelEdits(const Spec& spec) {
  if (spec.shared_edits == nullptr) return spec.edits;
  ContainerEdits out = *spec.shared_edits;
  auto add = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
  add(out.env, spec.edits.env);
  add(out.device_nodes, spec.edits.device_nodes);
  add(out.hooks, spec.edits.hooks);
  add(out.mounts, spec.edits.mounts);
  return out;
}

std::string MinimumVersion(const Spec& spec) {
  bool v050 = EditsNeedHostPath(spec.edits);
  bool v040 = EditsNeedMountType(spec.edits);
  if (spec.shared_edits != nullptr) {
    v050 = v050 || EditsNeedHostPath(*spec.shared_edits);
    v040 = v040 || EditsNeedMountType(*spec.shared_edits);
  }
  for (const auto& d : spec.devices) {
    if (!d.name.empty() && !IsLetter(d.name.front())) v050 = true;
    v050 = v050 || EditsNeedHostPath(d.edits);
    v040 = v040 || EditsNeedMountType(d.edits);
  }
  if (v050) return "0.5.0";
  if (v040) return "0.4.0";
  return "0.3.0";
}

Status ValidateSpec(const Spec& spec) {
  auto slash = spec.kind.find('/');
  if (slash == std::string::npos || spec.kind.find('/', slash + 1) != std::string::npos) {
    return InvalidArgument("CDI kind \"" + spec.kind + "\" is not <vendor>/<class>");
  }
  std::string vendor = spec.kind.substr(0, slash);
  std::string cls = spec.kind.substr(slash + 1);
  if (!IsValidVendorName(vendor)) {
    return InvalidArgument("CDI vendor \"" + vendor +
                           "\" is invalid (letters, digits, '_', '-', '.', at least 2 characters, "
                           "starting with a letter)");
  }
  if (!IsValidClassName(cls)) {
    return InvalidArgument("CDI class \"" + cls +
                           "\" is invalid (letters, digits, '_', '-', at least 2 characters, "
                           "starting with a letter)");
  }
  if (spec.devices.empty()) {
    return InvalidArgument("CDI spec of kind " + spec.kind + " has no devices");
  }
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const auto& d = spec.devices[i];
    if (!IsValidDeviceName(d.name)) {
      return InvalidArgument("CDI device name \"" + d.name + "\" is invalid");
    }
    for (size_t k = 0; k < i; ++k) {
      if (spec.devices[k].name == d.name) {
        return InvalidArgument("CDI device name \"" + d.name + "\" appears twice");
      }
    }
    if (d.edits.empty()) {
      // CDI readers reject devices without edits.
      return InvalidArgument("CDI device " + d.name + " has no container edits");
    }
    NVDRA_RETURN_IF_ERROR(ValidateEdits(d.edits, "CDI device ", d.name));
  }
  if (spec.shared_edits != nullptr) NVDRA_RETURN_IF_ERROR(ValidateEdits(*spec.shared_edits, "CDI spec ", spec.kind));
  NVDRA_RETURN_IF_ERROR(ValidateEdits(spec.edits, "CDI spec ", spec.kind));
  return Status::Ok();
}

std::string RenderEditsJson(const ContainerEdits& edits) { return EditsToJson(edits).dump(2) + "\n"; }

namespace {

// Whether `v` holds a byte that JSON escapes or one outside printable
// ASCII (a control character, '"', '\\', DEL, UTF-8): eight bytes at a
// time, since every string of every claim's spec passes here.
bool NeedsEscape(const std::string& v) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  // Whether a byte of `x` is below `n` (n <= 128).
  auto less = [](uint64_t x, uint64_t n) { return ((x - kOnes * n) & ~x & kHigh) != 0; };
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    uint64_t x;
    std::memcpy(&x, v.data() + i, 8);
    if ((x & kHigh) != 0 || less(x, 0x20) || less(x ^ (kOnes * 0x7f), 1) || less(x ^ (kOnes * '"'), 1) ||
        less(x ^ (kOnes * '\\'), 1)) {
      return true;
    }
  }
  for (; i < v.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return true;
  }
  return false;
}

// Writes a spec as nlohmann's dump(2) writes the same document built as an
// ordered_json, without building it: a claim spec carries every mount of
// the driver's files, and building that document for each Prepare was most
// of the Prepare's own CPU time. cdi_spec_render_test holds the two equal.
class PrettyJson {
 public:
  explicit PrettyJson(std::string& out) : out_(out) {}
  // Continues where another writer stands (`state`), into `out`.
  PrettyJson(std::string& out, std::vector<bool> state) : out_(out), first_(std::move(state)) {}

  // Text another writer wrote from this writer's state: members or items
  // of the object or array open here, when not empty.
  void Raw(const std::string& text) {
    if (text.empty()) return;
    out_ += text;
    first_.back() = false;
  }

  void String(const std::string& v) {
    if (NeedsEscape(v)) {
      // Escapes and UTF-8 (checked: invalid UTF-8 throws as before) the
      // way the document's dump does.
      out_ += ordered_json(v).dump();
      return;
    }
    out_ += '"';
    out_ += v;
    out_ += '"';
  }
  void Int(int64_t v) { out_ += std::to_string(v); }

  // Objects and arrays: Open, then Key (objects) or Item (arrays) before
  // each member, then Close. An empty one is written "{}" or "[]".
  void Open(char bracket) {
    out_ += bracket;
    first_.push_back(true);
  }
  void Key(const char* key) {
    Next();
    out_ += '"';
    out_ += key;
    out_ += "\": ";
  }
  void Item() { Next(); }
  void Close(char bracket) {
    bool empty = first_.back();
    first_.pop_back();
    if (!empty) {
      out_ += '\n';
      out_.append(2 * first_.size(), ' ');
    }
    out_ += bracket;
  }
  void Strings(const std::vector<std::string>& v) {
    Open('[');
    for (const auto& e : v) {
      Item();
      String(e);
    }
    Close(']');
  }

 private:
  void Next() {
    out_ += first_.back() ? "\n" : ",\n";
    first_.back() = false;
    out_.append(2 * first_.size(), ' ');
  }
  std::string& out_;
  std::vector<bool> first_;
};

// The members a CDI writer leaves out when empty or unset, as the
// document-building writer does.
void Member(PrettyJson& w, const char* key, const std::string& v) {
  if (v.empty()) return;
  w.Key(key);
  w.String(v);
}
void Member(PrettyJson& w, const char* key, const std::vector<std::string>& v) {
  if (v.empty()) return;
  w.Key(key);
  w.Strings(v);
}
template <typename T>
void Member(PrettyJson& w, const char* key, const std::optional<T>& v) {
  if (!v) return;
  w.Key(key);
  w.Int(*v);
}

// One item of each list of a containerEdits object.
void WriteItem(PrettyJson& w, const std::string& env) { w.String(env); }
void WriteItem(PrettyJson& w, const DeviceNode& n) {
  w.Open('{');
  w.Key("path");
  w.String(n.path);
  Member(w, "hostPath", n.host_path);
  Member(w, "type", n.type);
  Member(w, "major", n.major);
  Member(w, "minor", n.minor);
  Member(w, "fileMode", n.file_mode);
  Member(w, "permissions", n.permissions);
  w.Close('}');
}
void WriteItem(PrettyJson& w, const Hook& h) {
  w.Open('{');
  w.Key("hookName");
  w.String(h.hook_name);
  w.Key("path");
  w.String(h.path);
  Member(w, "args", h.args);
  Member(w, "env", h.env);
  Member(w, "timeout", h.timeout);
  w.Close('}');
}
void WriteItem(PrettyJson& w, const Mount& m) {
  w.Open('{');
  w.Key("hostPath");
  w.String(m.host_path);
  w.Key("containerPath");
  w.String(m.container_path);
  Member(w, "options", m.options);
  Member(w, "type", m.type);
  w.Close('}');
}

// A list member: `shared`, the text of items written before (empty or
// from a writer standing where the first item goes), then `items`.
template <typename T>
void List(PrettyJson& w, const char* key, const std::string& shared, const std::vector<T>& items) {
  if (shared.empty() && items.empty()) return;
  w.Key(key);
  w.Open('[');
  w.Raw(shared);
  for (const auto& item : items) {
    w.Item();
    WriteItem(w, item);
  }
  w.Close(']');
}

// The items of one list, as a writer at `depth` (inside the open array)
// writes them first.
template <typename T>
std::string ItemsText(const std::vector<T>& items, size_t depth) {
  std::string out;
  PrettyJson w(out, std::vector<bool>(depth, true));
  for (const auto& item : items) {
    w.Item();
    WriteItem(w, item);
  }
  return out;
}

void WriteEdits(PrettyJson& w, const ContainerEdits& e) {
  static const std::string kNone;
  w.Open('{');
  List(w, "env", kNone, e.env);
  List(w, "deviceNodes", kNone, e.device_nodes);
  List(w, "hooks", kNone, e.hooks);
  List(w, "mounts", kNone, e.mounts);
  w.Close('}');
}

bool HasSpecLevelEdits(const Spec& spec) {
  return !spec.edits.empty() || (spec.shared_edits != nullptr && !spec.shared_edits->empty());
}

// The spec; its spec-level edits (when not empty) written by `edits`.
template <typename F>
void WriteSpec(PrettyJson& w, const Spec& spec, F edits) {
  w.Open('{');
  w.Key("cdiVersion");
  w.String(MinimumVersion(spec));
  w.Key("kind");
  w.String(spec.kind);
  w.Key("devices");
  w.Open('[');
  for (const auto& d : spec.devices) {
    w.Item();
    w.Open('{');
    w.Key("name");
    w.String(d.name);
    w.Key("containerEdits");
    WriteEdits(w, d.edits);
    w.Close('}');
  }
  w.Close(']');
  if (HasSpecLevelEdits(spec)) {
    w.Key("containerEdits");
    edits();
  }
  w.Close('}');
}

}  // namespace

std::string RenderJson(const Spec& spec) {
  std::string out;
  out.reserve(4096);
  PrettyJson w(out);
  WriteSpec(w, spec, [&] {
    if (spec.shared_edits == nullptr) {
      WriteEdits(w, spec.edits);
    } else {
      WriteEdits(w, SpecLevelEdits(spec));
    }
  });
  out += '\n';
  return out;
}

std::shared_ptr<const SpecRenderer::Fragment> SpecRenderer::FragmentFor(
    const std::shared_ptr<const ContainerEdits>& edits, size_t depth) const {
  {
    MutexLock l(mu_);
    if (last_ != nullptr && last_->edits == edits && last_->depth == depth) return last_;
  }
  // Rendered outside the lock: two claims racing on new edits both render
  // the same text, and either one's is kept.
  auto f = std::make_shared<Fragment>();
  f->edits = edits;
  f->depth = depth;
  f->env = ItemsText(edits->env, depth);
  f->device_nodes = ItemsText(edits->device_nodes, depth);
  f->hooks = ItemsText(edits->hooks, depth);
  f->mounts = ItemsText(edits->mounts, depth);
  MutexLock l(mu_);
  last_ = f;
  return f;
}

std::string SpecRenderer::Render(const Spec& spec) const {
  // Spec-level edits are an object in the spec's object: their lists'
  // items sit three levels deep.
  constexpr size_t kSpecEditsItemDepth = 3;
  std::shared_ptr<const Fragment> f;
  std::string out;
  size_t shared_size = 0;
  if (spec.shared_edits != nullptr) {
    f = FragmentFor(spec.shared_edits, kSpecEditsItemDepth);
    shared_size = f->env.size() + f->device_nodes.size() + f->hooks.size() + f->mounts.size();
  }
  out.reserve(shared_size + 4096);
  PrettyJson w(out);
  WriteSpec(w, spec, [&] {
    if (f == nullptr) {
      WriteEdits(w, spec.edits);
      return;
    }
    w.Open('{');
    const ContainerEdits& own = spec.edits;
    List(w, "env", f->env, own.env);
    List(w, "deviceNodes", f->device_nodes, own.device_nodes);
    List(w, "hooks", f->hooks, own.hooks);
    List(w, "mounts", f->mounts, own.mounts);
    w.Close('}');
  });
  out += '\n';
  return out;
}

}  // namespace nvdra::cdi
