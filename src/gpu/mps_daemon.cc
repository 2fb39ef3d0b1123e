#include "gpu/mps_daemon.h"

#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <cerrno>
#include <sstream>

#include <openssl/sha.h>

#include "kube/yaml_json.h"
#include "util/file_util.h"
#include "util/go_template.h"

namespace nvdra::gpu {

using nlohmann::json;

std::string MpsDaemonId(const std::string& claim_uid, const std::vector<std::string>& sorted_uuids) {
  std::string joined;
  for (const auto& u : sorted_uuids) joined += (joined.empty() ? "" : ",") + u;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(joined.data()), joined.size(), digest);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (int i = 0; i < 3; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return claim_uid + "-" + hex.substr(0, 5);
}

std::string ShmSizeFromMeminfo(const std::string& meminfo) {
  std::istringstream in(meminfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    long long total = 0;
    std::string unit;
    if (!(fields >> total)) return "65536k";
    fields >> unit;
    return std::to_string(total / 2) + (unit.empty() ? "" : unit.substr(0, 1));
  }
  return "65536k";
}

std::string ShmMountPathFor(const std::string& container_driver_root) {
  struct stat st;
  std::string chroot_shm = JoinPath(container_driver_root, "dev/shm");
  if (::stat(chroot_shm.c_str(), &st) == 0) return "/driver-root/dev/shm";
  return "/dev/shm";
}

namespace {

// obj[key] when obj is an object holding it, else null: the API server's
// answers are read without a shape they might lack throwing.
const json& At(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

json TemplateData(const MpsSettings& s, const MpsDaemonUndo& d) {
  std::string visible;
  for (const auto& u : d.uuids) visible += (visible.empty() ? "" : ",") + u;
  json gates = json::object();
  for (const auto& [name, on] : s.feature_gates) gates[name] = on;
  return {
      {"NodeName", s.node_name},
      {"MpsControlDaemonNamespace", d.ns},
      {"MpsControlDaemonName", d.deployment},
      {"CUDA_VISIBLE_DEVICES", visible},
      {"DefaultActiveThreadPercentage",
       d.active_thread_percentage ? std::to_string(*d.active_thread_percentage) : std::string()},
      {"DefaultPinnedDeviceMemoryLimits", d.pinned_limits},
      {"MultiUser", d.multi_user},
      {"NvidiaDriverRoot", s.host_driver_root},
      {"MpsShmDirectory", JoinPath(d.root, "shm")},
      {"MpsPipeDirectory", JoinPath(d.root, "pipe")},
      {"MpsLogDirectory", JoinPath(d.root, "log")},
      {"MpsImageName", s.image},
      {"MpsImagePullPolicy", s.image_pull_policy},
      {"MpsImagePullSecretNames", s.image_pull_secrets},
      {"ServiceAccountName", s.service_account},
      {"FeatureGates", gates},
      {"MpsShmMountPath", s.shm_mount_path},
  };
}

}  // namespace

Result<json> RenderMpsDeployment(const std::string& template_text, const MpsSettings& settings,
                                 const MpsDaemonUndo& daemon) {
  const std::string what = "MPS control daemon template " + settings.template_path;
  const std::string& path = settings.template_path;
  const std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  NVDRA_ASSIGN_OR_RETURN(std::string yaml, RenderGoTemplate(name, template_text, TemplateData(settings, daemon)));
  NVDRA_ASSIGN_OR_RETURN(json d, kube::YamlDocumentToJson(yaml, what));
  if (At(d, "kind") != "Deployment" || At(d, "apiVersion") != "apps/v1") {
    return InvalidArgument(what + " does not render to an apps/v1 Deployment");
  }
  json& meta = d["metadata"];
  if (At(meta, "name") != daemon.deployment || At(meta, "namespace") != daemon.ns) {
    return InvalidArgument(what + " must name the Deployment {{ .MpsControlDaemonName }} in namespace "
                                  "{{ .MpsControlDaemonNamespace }} (it rendered another name or namespace)");
  }
  if (!meta.contains("labels") || !meta["labels"].is_object()) meta["labels"] = json::object();
  meta["labels"][kMpsNodeLabel] = settings.node_name;
  meta["labels"][kMpsClaimLabel] = daemon.id.substr(0, daemon.id.rfind('-'));
  return d;
}

namespace {

std::string DeploymentPath(const std::string& ns, const std::string& name = "") {
  return "/apis/apps/v1/namespaces/" + ns + "/deployments" + (name.empty() ? "" : "/" + name);
}

class KubeMpsDaemonApi final : public MpsDaemonApi {
 public:
  explicit KubeMpsDaemonApi(kube::KubeClient& client) : client_(client) {}

  Status Create(const json& deployment) override {
    const json& ns_field = At(At(deployment, "metadata"), "namespace");
    const std::string ns = ns_field.is_string() ? ns_field.get<std::string>() : "";
    return client_.CreateJson(DeploymentPath(ns), deployment).status();
  }

  Status CheckReady(const std::string& ns, const std::string& name, kube::Deadline deadline) override {
    NVDRA_ASSIGN_OR_RETURN(json d, client_.GetJson(DeploymentPath(ns, name), deadline));
    const json& ready = At(At(d, "status"), "readyReplicas");
    if (!ready.is_number_integer() || ready.get<int64_t>() != 1) {
      return Unavailable("waiting for MPS control daemon to come online");
    }
    const json& labels = At(At(At(d, "spec"), "selector"), "matchLabels");
    std::string selector;
    if (labels.is_object()) {
      for (const auto& [k, v] : labels.items()) {
        if (!v.is_string())
          return InvalidArgument("Deployment " + ns + "/" + name + " has a non-string matchLabels value");
        selector += (selector.empty() ? "" : ",") + k + "=" + v.get<std::string>();
      }
    }
    if (selector.empty()) return InvalidArgument("Deployment " + ns + "/" + name + " has no spec.selector.matchLabels");
    auto pods = client_.ListJson("/api/v1/namespaces/" + ns + "/pods", selector);
    if (!pods.ok()) return pods.status().Wrap("error listing pods from deployment");
    const json& items = At(*pods, "items");
    if (!items.is_array() || items.size() != 1) {
      return Unavailable("unexpected number of pods in deployment: " +
                         std::to_string(items.is_array() ? items.size() : 0));
    }
    const json& cs = At(At(items[0], "status"), "containerStatuses");
    if (!cs.is_array() || cs.size() != 1) return Unavailable("unexpected number of container statuses in pod");
    const json& ok = At(cs[0], "ready");
    if (!ok.is_boolean() || !ok.get<bool>()) return Unavailable("control daemon not yet ready");
    return Status::Ok();
  }

  Status Delete(const std::string& ns, const std::string& name) override {
    const std::string path = DeploymentPath(ns, name);
    json opts = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Foreground"}};
    NVDRA_ASSIGN_OR_RETURN(kube::HttpResponse r, client_.Do("DELETE", path, opts.dump()));
    if (r.status == 404) return Status::Ok();
    if (r.status / 100 != 2) return kube::StatusFromResponse("DELETE", path, r);
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListForNode(const std::string& ns, const std::string& node) override {
    NVDRA_ASSIGN_OR_RETURN(json list, client_.ListJson(DeploymentPath(ns), std::string(kMpsNodeLabel) + "=" + node));
    const json& items = At(list, "items");
    if (!items.is_array()) return InvalidArgument("the Deployment list of " + ns + " has no items list");
    std::vector<std::string> names;
    for (const auto& item : items) {
      const json& name = At(At(item, "metadata"), "name");
      if (name.is_string()) names.push_back(name.get<std::string>());
    }
    return names;
  }

 private:
  kube::KubeClient& client_;
};

bool IsMountPoint(const std::string& path) {
  struct stat self, parent;
  if (::stat(path.c_str(), &self) != 0) return false;
  if (::stat(JoinPath(path, "..").c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

class SystemShmMounter final : public ShmMounter {
 public:
  Status MountTmpfs(const std::string& path, const std::string& size) override {
    struct statfs fs;
    if (IsMountPoint(path) && ::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) return Status::Ok();
    const std::string data = "size=" + size;
    if (::mount("shm", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, data.c_str()) != 0) {
      return Internal("error mounting " + path + " as tmpfs: " + ErrnoText(errno));
    }
    return Status::Ok();
  }

  Status Unmount(const std::string& path) override {
    if (!IsMountPoint(path)) return Status::Ok();
    if (::umount2(path.c_str(), 0) == 0) return Status::Ok();
    if (errno == EINVAL || errno == ENOENT) return Status::Ok();
    // Still in use (a client that has not exited): detach it, so the
    // directory can go and the memory is freed once the last user leaves.
    if (errno == EBUSY && ::umount2(path.c_str(), MNT_DETACH) == 0) return Status::Ok();
    return Internal("error unmounting " + path + ": " + ErrnoText(errno));
  }
};

}  // namespace

std::unique_ptr<MpsDaemonApi> NewKubeMpsDaemonApi(kube::KubeClient& client) {
  return std::make_unique<KubeMpsDaemonApi>(client);
}

std::unique_ptr<ShmMounter> NewSystemShmMounter() { return std::make_unique<SystemShmMounter>(); }

}  // namespace nvdra::gpu
