#include "driver/device_metadata_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <nlohmann/json.hpp>

#include "cdi/cdi_spec_writer.h"
#include "cdi/spec.h"
#include "ledger/go_json.h"
#include "util/bounded_read.h"
#include "util/file_util.h"
#include "util/uid.h"

namespace nvdra::driver {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr const char* kSubDir = "dra-device-metadata";
constexpr const char* kFileName = "metadata.json";
constexpr const char* kContainerDir = "/var/run/kubernetes.io/dra-device-attributes";
// The API versions each file carries, newest first.
constexpr const char* kApiVersions[] = {"metadata.resource.k8s.io/v1alpha1"};
// A metadata file names a claim and a few devices: some KiB.
constexpr size_t kMaxFileBytes = 1u << 20;

// Go's json.MarshalIndent(v, "", "  "): the layout of the PrettySerializer,
// with Go's string escapes; members in insertion order.
void AppendGoIndented(std::string& out, const ordered_json& j, int depth) {
  const std::string pad(2 * (depth + 1), ' ');
  const std::string close_pad(2 * depth, ' ');
  if (j.is_object()) {
    if (j.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) out += ",\n";
      first = false;
      out += pad;
      ledger::AppendGoString(out, k);
      out += ": ";
      AppendGoIndented(out, v, depth + 1);
    }
    out += "\n" + close_pad + "}";
  } else if (j.is_array()) {
    if (j.empty()) {
      out += "[]";
      return;
    }
    out += "[\n";
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) out += ",\n";
      out += pad;
      AppendGoIndented(out, j[i], depth + 1);
    }
    out += "\n" + close_pad + "]";
  } else if (j.is_string()) {
    ledger::AppendGoString(out, j.get_ref<const std::string&>());
  } else {
    out += j.dump();
  }
}

ordered_json AttributeJson(const model::AttributeValue& v) {
  ordered_json a = ordered_json::object();
  if (const auto* s = std::get_if<std::string>(&v)) {
    a["string"] = *s;
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    a["int"] = *i;
  } else if (const auto* b = std::get_if<bool>(&v)) {
    a["bool"] = *b;
  } else if (const auto* l = std::get_if<model::IntList>(&v)) {
    if (!l->values.empty()) a["ints"] = l->values;  // omitempty, as Go
  } else {
    a["version"] = std::get<model::Version>(v).value;
  }
  return a;
}

// A path segment taken from the API server: a claim's namespace, name or
// request. Kubernetes allows none of these to hold a '/', but the path is
// built from them, so anything that could climb out is refused.
Status CheckSegment(const std::string& s, const std::string& what) {
  if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos || s.find('\0') != std::string::npos) {
    return InvalidArgument("device metadata: " + what + " '" + s + "' cannot name a file");
  }
  return Status::Ok();
}

Status WriteIfChanged(const std::string& path, const std::string& content, const std::string& what) {
  auto existing = ReadRegularFile(path, kMaxFileBytes);
  if (existing.ok() && *existing == content) return Status::Ok();
  // Not synced, as the claim's CDI spec: after a power loss the ledger entry
  // is of an earlier boot and the next Prepare writes both again.
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(path, content, 0644, /*sync=*/false).Wrap("writing " + what));
  if (::chmod(path.c_str(), 0644) != 0) return Internal("chmod " + path + ": " + ErrnoText(errno));
  return Status::Ok();
}

bool OlderThan(const std::string& path, std::chrono::seconds age) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return false;
  auto mtime = std::chrono::system_clock::time_point(std::chrono::seconds(st.st_mtim.tv_sec));
  return std::chrono::system_clock::now() - mtime >= age;
}

}  // namespace

std::string BaseRequest(const std::string& request) { return request.substr(0, request.find('/')); }

DeviceMetadataFiles::DeviceMetadataFiles(std::string driver, std::string plugin_dir, std::string cdi_root)
    : driver_(std::move(driver)), plugin_dir_(std::move(plugin_dir)), cdi_root_(std::move(cdi_root)) {}

std::string DeviceMetadataFiles::Root() const { return JoinPath(plugin_dir_, kSubDir); }

std::string DeviceMetadataFiles::ClaimDir(const std::string& ns, const std::string& name) const {
  return JoinPath(Root(), ns + "_" + name);
}

std::string DeviceMetadataFiles::FilePath(const std::string& ns, const std::string& name,
                                          const std::string& base_request) const {
  return JoinPath(JoinPath(ClaimDir(ns, name), base_request), kFileName);
}

std::string DeviceMetadataFiles::SpecPrefix() const { return driver_ + "_metadata_"; }

std::string DeviceMetadataFiles::SpecPath(const std::string& uid, const std::string& base_request) const {
  return JoinPath(cdi_root_, SpecPrefix() + uid + "_" + base_request + ".json");
}

std::string DeviceMetadataFiles::ContainerPath(const MetadataClaim& claim, const std::string& base_request) const {
  const bool from_template = claim.pod_claim_name && !claim.pod_claim_name->empty();
  const std::string sub = from_template ? "resourceclaimtemplates" : "resourceclaims";
  const std::string& key = from_template ? *claim.pod_claim_name : claim.name;
  return std::string(kContainerDir) + "/" + sub + "/" + key + "/" + base_request + "/" + driver_ + "-metadata.json";
}

std::string DeviceMetadataFiles::DeviceId(const std::string& uid, const std::string& base_request) const {
  return driver_ + "/metadata=" + uid + "_" + base_request;
}

bool DeviceMetadataFiles::IsDeviceId(const std::string& cdi_device_id) const {
  return cdi_device_id.rfind(driver_ + "/metadata=", 0) == 0;
}

std::string DeviceMetadataFiles::RenderFile(const MetadataClaim& claim, const std::string& request,
                                            const std::vector<MetadataDevice>& devices) const {
  std::string out;
  for (const char* api_version : kApiVersions) {
    ordered_json o = ordered_json::object();
    o["kind"] = "DeviceMetadata";
    o["apiVersion"] = api_version;
    o["metadata"] = {{"name", claim.name}, {"namespace", claim.ns}, {"uid", claim.uid}, {"generation", 1}};
    if (claim.pod_claim_name) o["podClaimName"] = *claim.pod_claim_name;
    ordered_json devs = ordered_json::array();
    for (const auto& d : devices) {
      ordered_json dj = {{"driver", driver_}, {"pool", d.pool}, {"name", d.device}};
      if (!d.attributes.empty()) {
        ordered_json attrs = ordered_json::object();
        for (const auto& [k, v] : d.attributes) attrs[k] = AttributeJson(v);  // std::map: sorted, as Go
        dj["attributes"] = std::move(attrs);
      }
      devs.push_back(std::move(dj));
    }
    ordered_json req = {{"name", request}};
    if (!devs.empty()) req["devices"] = std::move(devs);
    o["requests"] = ordered_json::array({std::move(req)});
    AppendGoIndented(out, o, 0);
    out += '\n';
  }
  return out;
}

std::string DeviceMetadataFiles::RenderSpec(const MetadataClaim& claim, const std::string& base_request) const {
  cdi::Spec spec;
  spec.kind = driver_ + "/metadata";
  cdi::SpecDevice d;
  d.name = claim.uid + "_" + base_request;
  d.edits.mounts.push_back(
      {FilePath(claim.ns, claim.name, base_request), ContainerPath(claim, base_request), {"ro", "bind"}, ""});
  spec.devices.push_back(std::move(d));
  return cdi::RenderJson(spec);
}

Result<std::string> DeviceMetadataFiles::Write(const MetadataClaim& claim, const std::string& request,
                                               const std::vector<MetadataDevice>& devices) const {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(claim.uid));
  const std::string base = BaseRequest(request);
  NVDRA_RETURN_IF_ERROR(CheckSegment(claim.ns, "namespace"));
  NVDRA_RETURN_IF_ERROR(CheckSegment(claim.name, "claim name"));
  NVDRA_RETURN_IF_ERROR(CheckSegment(base, "request"));
  if (claim.pod_claim_name) NVDRA_RETURN_IF_ERROR(CheckSegment(*claim.pod_claim_name, "pod claim name"));
  const std::string path = FilePath(claim.ns, claim.name, base);
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(ClaimDir(claim.ns, claim.name), base), 0755)
                            .Wrap("creating the device metadata directory"));
  NVDRA_RETURN_IF_ERROR(WriteIfChanged(path, RenderFile(claim, request, devices), "device metadata file " + path));
  const std::string spec = RenderSpec(claim, base);
  NVDRA_RETURN_IF_ERROR(MakeDirectories(cdi_root_, 0755).Wrap("creating CDI root"));
  const std::string spec_path = SpecPath(claim.uid, base);
  NVDRA_RETURN_IF_ERROR(WriteIfChanged(spec_path, spec, "device metadata CDI spec " + spec_path));
  return DeviceId(claim.uid, base);
}

std::string DeviceMetadataFiles::FileUid(const std::string& path) const {
  auto text = ReadRegularFile(path, kMaxFileBytes);
  if (!text.ok()) return "";
  // The stream's first object ends at the first closing brace in column 0.
  auto end = text->find("\n}");
  if (end == std::string::npos) return "";
  auto j = nlohmann::json::parse(text->substr(0, end + 2), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("metadata") || !j["metadata"].is_object()) return "";
  auto uid = j["metadata"].find("uid");
  return uid != j["metadata"].end() && uid->is_string() ? uid->get<std::string>() : "";
}

Status DeviceMetadataFiles::RemoveRequestDir(const std::string& request_dir) const {
  auto names = ListDirectory(request_dir);
  if (!names.ok() && names.status().code() != StatusCode::kNotFound) return names.status();
  if (names.ok()) {
    for (const auto& n : *names) {
      NVDRA_RETURN_IF_ERROR(RemoveFileIfExists(JoinPath(request_dir, n)).Wrap("removing device metadata"));
    }
    if (::rmdir(request_dir.c_str()) != 0 && errno != ENOENT) {
      return Internal("removing device metadata directory " + request_dir + ": " + ErrnoText(errno));
    }
  }
  // The claim's directory goes with its last request; another request's
  // directory (or another process's) keeps it.
  const std::string claim_dir = request_dir.substr(0, request_dir.rfind('/'));
  if (claim_dir != Root() && ::rmdir(claim_dir.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY &&
      errno != EEXIST) {
    return Internal("removing device metadata directory " + claim_dir + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

Status DeviceMetadataFiles::Remove(const std::string& uid, const std::string& ns, const std::string& name,
                                   const std::set<std::string>& base_requests) const {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(uid));
  for (const auto& base : base_requests) {
    if (!CheckSegment(base, "request").ok()) continue;  // never written
    NVDRA_RETURN_IF_ERROR(RemoveFileIfExists(SpecPath(uid, base)).Wrap("removing device metadata CDI spec"));
    if (!CheckSegment(ns, "namespace").ok() || !CheckSegment(name, "claim name").ok()) continue;
    const std::string request_dir = JoinPath(ClaimDir(ns, name), base);
    // A claim deleted and made again under its name shares the directory:
    // the newer claim's file stays.
    const std::string owner = FileUid(JoinPath(request_dir, kFileName));
    if (!owner.empty() && owner != uid) continue;
    NVDRA_RETURN_IF_ERROR(RemoveRequestDir(request_dir));
  }
  return Status::Ok();
}

Status DeviceMetadataFiles::RemoveAllOf(const std::string& uid) const {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(uid));
  const std::string spec_prefix = SpecPrefix() + uid + "_";
  auto specs = ListDirectory(cdi_root_);
  if (specs.ok()) {
    for (const auto& n : *specs) {
      // The spec, and a temp file a crashed write left (".<spec>.tmp-N").
      if (n.rfind(spec_prefix, 0) == 0 || n.rfind("." + spec_prefix, 0) == 0) {
        NVDRA_RETURN_IF_ERROR(RemoveFileIfExists(JoinPath(cdi_root_, n)).Wrap("removing device metadata CDI spec"));
      }
    }
  }
  auto claims = ListDirectory(Root());
  if (!claims.ok()) return claims.status().code() == StatusCode::kNotFound ? Status::Ok() : claims.status();
  for (const auto& c : *claims) {
    auto requests = ListDirectory(JoinPath(Root(), c));
    if (!requests.ok()) continue;
    for (const auto& r : *requests) {
      const std::string request_dir = JoinPath(JoinPath(Root(), c), r);
      if (FileUid(JoinPath(request_dir, kFileName)) == uid) NVDRA_RETURN_IF_ERROR(RemoveRequestDir(request_dir));
    }
  }
  return Status::Ok();
}

Result<std::set<std::string>> DeviceMetadataFiles::ListUids(std::vector<std::string>* stale_unknown) const {
  std::set<std::string> uids;
  const std::string prefix = SpecPrefix();
  auto specs = ListDirectory(cdi_root_);
  if (!specs.ok() && specs.status().code() != StatusCode::kNotFound) return specs.status();
  if (specs.ok()) {
    for (const auto& n : *specs) {
      std::string rest = n.rfind(prefix, 0) == 0         ? n.substr(prefix.size())
                         : n.rfind("." + prefix, 0) == 0 ? n.substr(prefix.size() + 1)
                                                         : "";
      std::string uid = rest.substr(0, rest.find('_'));
      if (rest.find('_') != std::string::npos && IsValidClaimUid(uid)) uids.insert(uid);
    }
  }
  auto claims = ListDirectory(Root());
  if (!claims.ok()) {
    if (claims.status().code() == StatusCode::kNotFound) return uids;
    return claims.status();
  }
  for (const auto& c : *claims) {
    auto requests = ListDirectory(JoinPath(Root(), c));
    if (!requests.ok()) continue;
    if (requests->empty() && stale_unknown != nullptr && OlderThan(JoinPath(Root(), c), cdi::kStaleTempFileAge)) {
      stale_unknown->push_back(JoinPath(Root(), c));  // a crash between its mkdir and the file's
    }
    for (const auto& r : *requests) {
      const std::string request_dir = JoinPath(JoinPath(Root(), c), r);
      std::string uid = FileUid(JoinPath(request_dir, kFileName));
      if (IsValidClaimUid(uid)) {
        uids.insert(uid);
      } else if (stale_unknown != nullptr && OlderThan(request_dir, cdi::kStaleTempFileAge)) {
        stale_unknown->push_back(request_dir);
      }
    }
  }
  return uids;
}

}  // namespace nvdra::driver
