// The parts of an MPS control daemon (one per claim and device set, as
// upstream runs it): its id and Deployment rendered from the template file,
// the Kubernetes calls that create, check, delete and find them
// (MpsDaemonApi), and the shm tmpfs its clients share (ShmMounter).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/mps_undo.h"
#include "kube/kube_client.h"
#include "util/status.h"

namespace nvdra::gpu {

// Upstream's image ships the template here.
inline constexpr const char* kDefaultMpsTemplatePath = "/templates/mps-control-daemon.tmpl.yaml";
// Labels the plugin adds to every daemon it creates (beside the template's
// `app`), so that the reconciler finds this node's daemons.
inline constexpr const char* kMpsNodeLabel = "gpu.nvidia.com/mps-control-daemon-node";
inline constexpr const char* kMpsClaimLabel = "gpu.nvidia.com/mps-control-daemon-claim";

// What every daemon of this plugin shares (flags and the node).
struct MpsSettings {
  std::string plugin_dir;  // daemons live under <plugin_dir>/mps/<id>
  std::string template_path = kDefaultMpsTemplatePath;
  std::string node_name;
  std::string ns;  // --namespace
  std::string image;
  std::string image_pull_policy;
  std::vector<std::string> image_pull_secrets;
  std::string service_account;
  std::string host_driver_root = "/";  // the driver root as the host sees it
  std::map<std::string, bool> feature_gates;
  std::string shm_size = "65536k";          // tmpfs size=, from /proc/meminfo
  std::string shm_mount_path = "/dev/shm";  // where the daemon's container sees shm
};

// Upstream's id: "<claim uid>-<first 5 hex digits of sha256(join(uuids, ","))>".
std::string MpsDaemonId(const std::string& claim_uid, const std::vector<std::string>& sorted_uuids);

// Half of MemTotal from a /proc/meminfo text ("<n>k"), else "65536k", as upstream.
std::string ShmSizeFromMeminfo(const std::string& meminfo);
// Upstream's container path of the shm: <driver root mount>/dev/shm when the
// driver root has one (the daemon then runs in a chroot), else /dev/shm.
std::string ShmMountPathFor(const std::string& container_driver_root);

// The Deployment for `daemon`, rendered from the template text, with the
// plugin's labels added. InvalidArgument when the template does not render
// to one Deployment of the recorded name and namespace.
Result<nlohmann::json> RenderMpsDeployment(const std::string& template_text, const MpsSettings& settings,
                                           const MpsDaemonUndo& daemon);

// The Kubernetes calls (apps/v1 Deployments and core Pods, in the plugin's
// namespace).
class MpsDaemonApi {
 public:
  virtual ~MpsDaemonApi() = default;
  // AlreadyExists when a Deployment of that name exists.
  virtual Status Create(const nlohmann::json& deployment) = 0;
  // Upstream's readiness: the Deployment has one ready replica and its
  // selector finds exactly one pod, with one container, ready. OK when so;
  // Unavailable saying what is missing otherwise; other errors as the API
  // answered.
  virtual Status CheckReady(const std::string& ns, const std::string& name, kube::Deadline deadline) = 0;
  // Foreground deletion; a Deployment that is gone is OK.
  virtual Status Delete(const std::string& ns, const std::string& name) = 0;
  // Names of the Deployments in `ns` labelled for `node`.
  virtual Result<std::vector<std::string>> ListForNode(const std::string& ns, const std::string& node) = 0;
};

std::unique_ptr<MpsDaemonApi> NewKubeMpsDaemonApi(kube::KubeClient& client);

// The shm tmpfs of a daemon.
class ShmMounter {
 public:
  virtual ~ShmMounter() = default;
  // Mounts a tmpfs of `size` on `path` unless one is mounted there already.
  virtual Status MountTmpfs(const std::string& path, const std::string& size) = 0;
  // Unmounts `path`; a path that is no mount point or is gone is OK.
  virtual Status Unmount(const std::string& path) = 0;
};

// mount(2) and umount2(2) (needs CAP_SYS_ADMIN, as the plugin has).
std::unique_ptr<ShmMounter> NewSystemShmMounter();

}  // namespace nvdra::gpu
