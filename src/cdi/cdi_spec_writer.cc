#include "cdi/cdi_spec_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "util/bounded_read.h"
#include "util/file_util.h"
#include "util/json_depth.h"
#include "util/log.h"
#include "util/uid.h"

namespace nvdra::cdi {

// A claim's spec read back (recovery, a repeated Prepare) longer than this is
// refused, as is anything at its name that is not a regular file: a spec
// names a few devices and their files, some KiB.
constexpr size_t kMaxClaimSpecBytes = 4u << 20;

namespace {

// yaml-cpp recurses once per nesting level; the Go driver's specs nest a
// handful of levels, so anything far deeper is refused before parsing.
Status CheckYamlNesting(const std::string& text, const std::string& what) {
  constexpr int kMaxFlowDepth = 100;
  constexpr size_t kMaxIndent = 400;
  int depth = 0;
  size_t indent = 0;
  bool line_start = true;
  for (char c : text) {
    if (c == '[' || c == '{') depth++;
    if ((c == ']' || c == '}') && depth > 0) depth--;
    if (depth > kMaxFlowDepth) return InvalidArgument(what + " nests deeper than " + std::to_string(kMaxFlowDepth));
    if (c == '\n') {
      line_start = true;
      indent = 0;
    } else if (line_start && (c == ' ' || c == '-')) {
      if (++indent > kMaxIndent)
        return InvalidArgument(what + " is indented deeper than " + std::to_string(kMaxIndent));
    } else {
      line_start = false;
    }
  }
  return Status::Ok();
}

// A JSON document as block-style YAML, which the Go driver writes its specs
// in. Every string stays double-quoted with JSON's escapes (valid in YAML's
// double-quoted style), so no value changes type on the way back ("0666"
// stays a string, "true" stays a string).
void AppendYaml(const nlohmann::ordered_json& v, int indent, std::string& out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object() && !v.empty()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += pad + nlohmann::ordered_json(it.key()).dump() + ":";
      const auto& c = it.value();
      if ((c.is_object() || c.is_array()) && !c.empty()) {
        out += "\n";
        AppendYaml(c, indent + 2, out);
      } else {
        out += " " + c.dump() + "\n";
      }
    }
  } else if (v.is_array() && !v.empty()) {
    for (const auto& c : v) {
      if ((c.is_object() || c.is_array()) && !c.empty()) {
        // The first line of the element goes after the dash, the rest under it.
        std::string inner;
        AppendYaml(c, indent + 2, inner);
        out += pad + "- " + inner.substr(static_cast<size_t>(indent) + 2);
      } else {
        out += pad + "- " + c.dump() + "\n";
      }
    }
  } else {
    out += pad + v.dump() + "\n";
  }
}

// The names of a spec's devices, in file order; entries that are not a
// mapping with a string name are skipped (a file on disk may hold anything).
// `ref_env`: the variable whose value, in the spec-level env, names the claim.
Result<CdiSpecWriter::ClaimSpecContents> JsonSpecContents(std::string_view text, const std::string& path,
                                                          const std::string& ref_env) {
  NVDRA_RETURN_IF_ERROR(CheckJsonDepth(text, "CDI spec " + path));
  nlohmann::json spec = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) return InvalidArgument("CDI spec " + path + " is not a JSON object");
  CdiSpecWriter::ClaimSpecContents out;
  auto devices = spec.find("devices");
  if (devices != spec.end() && devices->is_array()) {
    for (const auto& d : *devices) {
      auto n = d.is_object() ? d.find("name") : d.end();
      if (n != d.end() && n->is_string()) out.devices.push_back(n->get<std::string>());
    }
  }
  auto edits = spec.find("containerEdits");
  if (edits != spec.end() && edits->is_object()) {
    auto env = edits->find("env");
    if (env != edits->end() && env->is_array()) {
      const std::string key = ref_env + "=";
      for (const auto& e : *env) {
        if (!e.is_string()) continue;
        const std::string& v = e.get_ref<const std::string&>();
        if (v.rfind(key, 0) != 0) continue;
        std::string ref = v.substr(key.size());
        auto slash = ref.find('/');
        if (slash == std::string::npos || slash == 0 || slash + 1 == ref.size()) break;
        out.ns = ref.substr(0, slash);
        out.name = ref.substr(slash + 1);
        break;
      }
    }
  }
  return out;
}

// The same for the Go driver's specs, which are YAML.
Result<std::vector<std::string>> YamlDeviceNames(const std::string& text, const std::string& path) {
  NVDRA_RETURN_IF_ERROR(CheckYamlNesting(text, "CDI spec " + path));
  try {
    const YAML::Node spec = YAML::Load(text);
    if (!spec.IsMap()) return InvalidArgument("CDI spec " + path + " is not a YAML mapping");
    std::vector<std::string> out;
    const YAML::Node devices = spec["devices"];
    if (!devices || !devices.IsSequence()) return out;
    for (const auto& d : devices) {
      if (!d.IsMap()) continue;
      const YAML::Node n = d["name"];
      if (n && n.IsScalar()) out.push_back(n.Scalar());
    }
    return out;
  } catch (const YAML::Exception& e) {
    return InvalidArgument("CDI spec " + path + " is not YAML: " + e.what());
  }
}

// `s`, with `context()` when it failed: the context is built only then
// (this runs for every claim).
template <typename F>
Status WrapError(Status s, F context) {
  return s.ok() ? s : s.Wrap(context());
}

}  // namespace

CdiSpecWriter::CdiSpecWriter(std::string root, std::string vendor, std::string cls)
    : root_(std::move(root)), vendor_(std::move(vendor)), cls_(std::move(cls)) {}

Status CdiSpecWriter::EnsureDirectory() const {
  struct stat st;
  if (::stat(root_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
    std::string aside = root_ + ".not-a-directory-" + std::to_string(ms);
    if (::rename(root_.c_str(), aside.c_str()) != 0) {
      return FailedPrecondition("CDI root " + root_ +
                                " exists but is not a directory, and it cannot be moved "
                                "aside (" +
                                ErrnoText(errno) + "); remove it so CDI specs can be written");
    }
    NVDRA_ERROR("CDI root {} existed but was not a directory; it was renamed to {} and the directory created", root_,
                aside);
  }
  return MakeDirectories(root_, 0755).Wrap("creating CDI root");
}

Status CdiSpecWriter::EnsureRoot() const {
  NVDRA_RETURN_IF_ERROR(EnsureDirectory());
  auto swept = SweepStaleTempFiles();
  if (!swept.ok()) {
    NVDRA_WARN("CDI root {}: sweeping temp files: {}", root_, swept.status().message());
  } else if (*swept > 0) {
    NVDRA_INFO("CDI root {}: removed {} temp files a crashed write left behind", root_, *swept);
  }
  return Status::Ok();
}

bool CdiSpecWriter::IsOurTempFile(const std::string& name, std::string* uid) const {
  // ".<prefix><uid>.json.tmp-N" from WriteFileAtomically.
  const std::string tmp_prefix = "." + FilePrefix();
  if (name.rfind(tmp_prefix, 0) != 0) return false;
  auto end = name.find(".json.tmp-");
  if (end == std::string::npos || end < tmp_prefix.size()) return false;
  *uid = name.substr(tmp_prefix.size(), end - tmp_prefix.size());
  return true;
}

Result<size_t> CdiSpecWriter::SweepStaleTempFiles(std::chrono::seconds min_age) const {
  auto names = ListDirectory(root_);
  if (!names.ok()) {
    if (names.status().code() == StatusCode::kNotFound) return size_t{0};
    return names.status();
  }
  size_t removed = 0;
  const auto now = std::chrono::system_clock::now();
  for (const auto& name : *names) {
    std::string uid;
    if (!IsOurTempFile(name, &uid)) continue;
    std::string path = JoinPath(root_, name);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    auto mtime = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
    if (now - mtime < min_age) continue;
    NVDRA_RETURN_IF_ERROR(RemoveFileIfExists(path));
    ++removed;
  }
  return removed;
}

// The CDI library's GenerateTransientSpecName: "<vendor>-<class>_<uid>"
// with any '/' turned into '_'.
std::string CdiSpecWriter::FilePrefix() const { return vendor_ + "-" + cls_ + "_"; }

Result<std::string> CdiSpecWriter::ClaimSpecPath(const std::string& claim_uid) const {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(claim_uid));
  return JoinPath(root_, FilePrefix() + claim_uid + ".json");
}

std::string CdiSpecWriter::ClaimDeviceName(const std::string& claim_uid, const std::string& device_name) {
  return claim_uid + "-" + device_name;
}

std::string CdiSpecWriter::DeviceId(const std::string& claim_uid, const std::string& device_name) const {
  return Kind() + "=" + ClaimDeviceName(claim_uid, device_name);
}

std::string CdiSpecWriter::ClaimRefEnv(const std::string& claim_uid) {
  std::string out = "NVDRA_CLAIM_" + claim_uid;
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

Spec CdiSpecWriter::BuildClaimSpec(const std::string& claim_uid, std::vector<SpecDevice> devices,
                                   ContainerEdits common_edits, const std::string& claim_namespace,
                                   const std::string& claim_name) const {
  Spec spec;
  spec.kind = Kind();
  spec.edits = std::move(common_edits);
  if (!claim_name.empty()) spec.edits.env.push_back(ClaimRefEnv(claim_uid) + "=" + claim_namespace + "/" + claim_name);
  spec.devices = std::move(devices);
  for (auto& d : spec.devices) d.name = ClaimDeviceName(claim_uid, d.name);
  std::sort(spec.devices.begin(), spec.devices.end(),
            [](const SpecDevice& a, const SpecDevice& b) { return a.name < b.name; });
  return spec;
}

Status CdiSpecWriter::WriteClaimSpec(const std::string& claim_uid, const Spec& spec) const {
  NVDRA_ASSIGN_OR_RETURN(std::string path, ClaimSpecPath(claim_uid));
  if (spec.kind != Kind()) {
    return InvalidArgument("CDI spec for claim " + claim_uid + " has kind " + spec.kind + ", want " + Kind());
  }
  for (const auto& d : spec.devices) {
    if (!(d.name.size() > claim_uid.size() && d.name.starts_with(claim_uid) && d.name[claim_uid.size()] == '-')) {
      return InvalidArgument("CDI device " + d.name + " of claim " + claim_uid + " does not start with the claim UID");
    }
  }
  NVDRA_RETURN_IF_ERROR(WrapError(ValidateSpec(spec), [&] { return "CDI spec for claim " + claim_uid; }));
  std::string content = renderer_->Render(spec);
  // The upstream driver wrote the same device names to "<prefix><uid>.yaml".
  // Left next to ours (a claim prepared before an upgrade and prepared again),
  // runtimes see each device in two specs and refuse it as conflicting.
  const std::string legacy = JoinPath(root_, FilePrefix() + claim_uid + ".yaml");
  auto existing = ReadRegularFile(path, kMaxClaimSpecBytes);
  if (existing.ok() && *existing == content) {
    return WrapError(RemoveFileIfExists(legacy),
                     [&] { return "removing the upstream CDI spec of claim " + claim_uid; });
  }
  NVDRA_RETURN_IF_ERROR(EnsureDirectory());
  // Atomic (temp file + rename) but not synced: recovery never needs the
  // spec to survive a power loss. A crash of the process loses nothing the
  // kernel holds; a power loss is a reboot, after which the ledger entry is
  // of an earlier boot and the kubelet's next Prepare rewrites the spec
  // (kRedoAfterReboot), and the orphan sweep removes a spec whose claim the
  // ledger does not hold. See docs/ledger-format.md, "Durable writes".
  // Runtimes read specs as root, but tools run by users should too, whatever
  // our umask was: the temp file gets its mode with fchmod before the rename.
  NVDRA_RETURN_IF_ERROR(WrapError(WriteFileAtomically(path, content, 0644, /*sync=*/false),
                                  [&] { return "writing CDI spec for claim " + claim_uid; }));
  return WrapError(RemoveFileIfExists(legacy), [&] { return "removing the upstream CDI spec of claim " + claim_uid; });
}

Status CdiSpecWriter::RemoveClaimSpec(const std::string& claim_uid) const {
  NVDRA_ASSIGN_OR_RETURN(std::string path, ClaimSpecPath(claim_uid));
  auto context = [&] { return "removing CDI spec of claim " + claim_uid; };
  NVDRA_RETURN_IF_ERROR(WrapError(RemoveFileIfExists(path), context));
  return WrapError(RemoveFileIfExists(JoinPath(root_, FilePrefix() + claim_uid + ".yaml")), context);
}

Status CdiSpecWriter::HandClaimSpecToUpstream(const std::string& claim_uid) const {
  NVDRA_ASSIGN_OR_RETURN(std::string path, ClaimSpecPath(claim_uid));
  const std::string upstream = JoinPath(root_, FilePrefix() + claim_uid + ".yaml");
  auto text = ReadRegularFile(path, kMaxClaimSpecBytes);
  if (!text.ok()) {
    if (text.status().code() != StatusCode::kNotFound) return text.status();
    if (PathExists(upstream)) return Status::Ok();  // handed over already
    return NotFound("no CDI spec of claim " + claim_uid + " in " + root_);
  }
  NVDRA_RETURN_IF_ERROR(CheckJsonDepth(*text, "CDI spec " + path));
  auto spec = nlohmann::ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) return InvalidArgument("CDI spec " + path + " is not a JSON object");
  std::string yaml = "---\n";
  AppendYaml(spec, 0, yaml);
  // The YAML first, then ours removed: a runtime reading the directory in
  // between sees the devices twice (a container started in that instant
  // fails and is retried), never not at all.
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(upstream, yaml, 0644, /*sync=*/false)
                            .Wrap("writing the upstream CDI spec of claim " + claim_uid));
  return RemoveFileIfExists(path).Wrap("removing CDI spec of claim " + claim_uid);
}

Result<std::vector<std::string>> CdiSpecWriter::ClaimSpecDevices(const std::string& claim_uid) const {
  NVDRA_ASSIGN_OR_RETURN(ClaimSpecContents c, ReadClaimSpec(claim_uid));
  return std::move(c.devices);
}

Result<CdiSpecWriter::ClaimSpecContents> CdiSpecWriter::ParseClaimSpec(std::string_view text, bool yaml,
                                                                       const std::string& claim_uid,
                                                                       const std::string& path) {
  ClaimSpecContents read;
  if (yaml) {
    NVDRA_ASSIGN_OR_RETURN(read.devices, YamlDeviceNames(std::string(text), path));
  } else {
    NVDRA_ASSIGN_OR_RETURN(read, JsonSpecContents(text, path, ClaimRefEnv(claim_uid)));
  }
  ClaimSpecContents out;
  out.ns = std::move(read.ns);
  out.name = std::move(read.name);
  const std::string prefix = claim_uid + "-";
  for (const auto& name : read.devices) {
    if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size()) out.devices.push_back(name.substr(prefix.size()));
  }
  return out;
}

Result<CdiSpecWriter::ClaimSpecContents> CdiSpecWriter::ReadClaimSpec(const std::string& claim_uid) const {
  NVDRA_ASSIGN_OR_RETURN(std::string path, ClaimSpecPath(claim_uid));
  auto text = ReadRegularFile(path, kMaxClaimSpecBytes);
  if (text.ok()) return ParseClaimSpec(*text, /*yaml=*/false, claim_uid, path);
  if (text.status().code() != StatusCode::kNotFound) return text.status();
  // Only the Go driver's spec: a claim it prepared, with the same device
  // names, which a lost ledger (or checkpoint) must not forget.
  const std::string legacy = JoinPath(root_, FilePrefix() + claim_uid + ".yaml");
  auto yaml = ReadRegularFile(legacy, kMaxClaimSpecBytes);
  if (!yaml.ok() && yaml.status().code() == StatusCode::kNotFound) return NotFound("no CDI spec of claim " + claim_uid);
  NVDRA_RETURN_IF_ERROR(yaml.status());
  return ParseClaimSpec(*yaml, /*yaml=*/true, claim_uid, legacy);
}

Result<std::vector<std::string>> CdiSpecWriter::ListClaimSpecUids() const {
  auto names = ListDirectory(root_);
  if (!names.ok()) {
    if (names.status().code() == StatusCode::kNotFound) return std::vector<std::string>{};
    return names.status().Wrap("listing CDI specs");
  }
  std::vector<std::string> uids;
  const std::string prefix = FilePrefix();
  for (const auto& name : *names) {
    if (name.rfind(prefix, 0) != 0) continue;
    std::string rest = name.substr(prefix.size());
    for (const char* ext : {".json", ".yaml"}) {
      std::string e = ext;
      if (rest.size() > e.size() && rest.compare(rest.size() - e.size(), e.size(), e) == 0) {
        std::string uid = rest.substr(0, rest.size() - e.size());
        if (IsValidClaimUid(uid)) uids.push_back(uid);
      }
    }
  }
  std::sort(uids.begin(), uids.end());
  uids.erase(std::unique(uids.begin(), uids.end()), uids.end());
  return uids;
}

Result<std::vector<std::string>> CdiSpecWriter::SweepOrphanClaimSpecs(
    const std::function<bool(const std::string&)>& is_known) const {
  NVDRA_ASSIGN_OR_RETURN(auto uids, ListClaimSpecUids());
  std::vector<std::string> removed;
  for (const auto& uid : uids) {
    if (is_known(uid)) continue;
    NVDRA_RETURN_IF_ERROR(RemoveClaimSpec(uid));
    removed.push_back(uid);
  }
  // Temp files orphaned by a crash between create and rename. A known
  // claim's temp file may belong to a write in flight until it is stale.
  auto names = ListDirectory(root_);
  if (names.ok()) {
    for (const auto& name : *names) {
      std::string uid;
      if (!IsOurTempFile(name, &uid) || is_known(uid)) continue;
      NVDRA_RETURN_IF_ERROR(RemoveFileIfExists(JoinPath(root_, name)));
    }
  }
  NVDRA_RETURN_IF_ERROR(SweepStaleTempFiles().status());
  return removed;
}

}  // namespace nvdra::cdi
