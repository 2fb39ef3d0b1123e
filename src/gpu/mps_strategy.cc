#include "gpu/mps_strategy.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <thread>

#include "gpu/gpu_config_kinds.h"
#include "gpu/mig_config.h"
#include "gpu/mps_config.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::gpu {

namespace {

constexpr const char* kVoltaComputeCapability = "7.0";

// "9.0" -> (9, 0); nullopt for anything else.
std::optional<std::pair<int, int>> ComputeCapability(const std::string& text) {
  int major = 0, minor = 0;
  char dot = 0;
  if (std::sscanf(text.c_str(), "%d%c%d", &major, &dot, &minor) != 3 || dot != '.') return std::nullopt;
  return std::make_pair(major, minor);
}

// Upstream's check for multi-user mode: every full GPU of the daemon is Volta
// or newer.
Status EnsureVolta(const devices::NodeInventory& inventory, const std::vector<std::string>& gpu_uuids) {
  std::string errors;
  for (const auto& uuid : gpu_uuids) {
    auto gpu = std::find_if(inventory.gpus.begin(), inventory.gpus.end(),
                            [&](const devices::GpuInfo& g) { return g.uuid == uuid; });
    if (gpu == inventory.gpus.end()) {
      return FailedPrecondition("could not check gpu " + uuid + ": missing gpu info (required >= \"" +
                                kVoltaComputeCapability + "\")");
    }
    auto cc = ComputeCapability(gpu->cuda_compute_capability);
    if (!cc) {
      errors += (errors.empty() ? "" : "\n") + std::string("gpu ") + uuid + " has invalid cudaComputeCapability \"" +
                gpu->cuda_compute_capability + "\"";
    } else if (cc->first < 7) {
      errors += (errors.empty() ? "" : "\n") + uuid + " has insufficient cudaComputeCapability \"" +
                gpu->cuda_compute_capability + "\", wanted >= \"" + kVoltaComputeCapability + "\"";
    }
  }
  return errors.empty() ? Status::Ok() : FailedPrecondition(errors);
}

const MpsConfig* MpsConfigOf(const config::Config& c) {
  if (const auto* g = c.As<GpuConfig>()) {
    return g->sharing && g->sharing->Settings<MpsConfig>() ? &*g->sharing->Settings<MpsConfig>() : nullptr;
  }
  if (const auto* m = c.As<MigDeviceConfig>()) {
    return m->sharing && m->sharing->Settings<MpsConfig>() ? &*m->sharing->Settings<MpsConfig>() : nullptr;
  }
  return nullptr;
}

}  // namespace

cdi::ContainerEdits MpsContainerEdits(const MpsDaemonUndo& daemon) {
  cdi::ContainerEdits e;
  e.env.push_back("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps");
  e.mounts.push_back({JoinPath(daemon.root, "shm"), "/dev/shm", {"rw", "nosuid", "nodev", "bind"}, ""});
  e.mounts.push_back({JoinPath(daemon.root, "pipe"), "/tmp/nvidia-mps", {"rw", "nosuid", "nodev", "bind"}, ""});
  return e;
}

std::string_view MpsStrategy::name() const { return kMpsStrategy; }

Status MpsStrategy::Plan(const std::string& claim_uid, const config::ConfigGroup& group, const GpuDeviceLookup& devices,
                         GpuUndo& undo) const {
  if (rt_.consumable_shares)
    return FailedPrecondition("MPS sharing is not supported when consumable shares is enabled");
  if (!rt_.api || !rt_.mounter) {
    return FailedPrecondition("MPS sharing needs the MPSSupport feature gate and --image-name (IMAGE_NAME)");
  }
  MpsDaemonUndo d;
  for (const auto& r : group.results) {
    const GpuDevice* dev = devices.Find(r.device);
    if (dev == nullptr) return Internal("device " + r.device + " of an MPS config group is unknown");
    d.uuids.push_back(dev->uuid);
    if (!dev->partition) d.exclusive_process.push_back(dev->gpu->uuid);
  }
  for (auto* v : {&d.uuids, &d.exclusive_process}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  MpsConfig none;
  const MpsConfig& c = MpsConfigOf(group.config) ? *MpsConfigOf(group.config) : none;
  d.active_thread_percentage = c.default_active_thread_percentage;
  auto limits = c.PinnedLimitsFor(d.uuids);
  if (!limits.ok()) {
    return limits.status().Wrap("error starting MPS control daemon: error transforming "
                                "DefaultPerDevicePinnedMemoryLimit into string");
  }
  d.pinned_limits = *limits;
  d.multi_user = c.multi_user.value_or(false);
  if (d.multi_user) {
    NVDRA_RETURN_IF_ERROR(EnsureVolta(inventory_, d.exclusive_process)
                              .Wrap("error starting MPS control daemon: multiuser mode was requested but is not "
                                    "supported"));
  }
  d.id = MpsDaemonId(claim_uid, d.uuids);
  d.ns = rt_.settings.ns;
  d.deployment = "mps-control-daemon-" + d.id;
  d.root = JoinPath(JoinPath(rt_.settings.plugin_dir, "mps"), d.id);
  undo.Get<MpsUndo>().daemons.push_back(std::move(d));
  return Status::Ok();
}

Status MpsStrategy::ApplyOne(const MpsDaemonUndo& d) {
  for (const char* sub : {"shm", "pipe", "log"}) {
    NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(d.root, sub), 0755));
  }
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("mps-after-directories"));
  NVDRA_RETURN_IF_ERROR(rt_.mounter->MountTmpfs(JoinPath(d.root, "shm"), rt_.settings.shm_size));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("mps-after-shm-mount"));
  for (const auto& uuid : d.exclusive_process) {
    NVDRA_RETURN_IF_ERROR(control_.SetComputeMode(uuid, "EXCLUSIVE_PROCESS").Wrap("error setting compute mode"));
  }
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("mps-after-compute-mode"));
  auto text = ReadFileToString(rt_.settings.template_path);
  if (!text.ok()) return text.status().Wrap("failed to parse template file").AsPermanent();
  NVDRA_ASSIGN_OR_RETURN(nlohmann::json deployment, RenderMpsDeployment(*text, rt_.settings, d));
  Status created = rt_.api->Create(deployment);
  if (!created.ok() && created.code() != StatusCode::kAlreadyExists) {
    return created.Wrap("failed to create deployment " + d.ns + "/" + d.deployment);
  }
  if (created.ok()) NVDRA_INFO("Started MPS control daemon {}/{} for devices {}", d.ns, d.deployment, d.uuids.size());
  return NVDRA_FAILPOINT("mps-after-deployment-create");
}

Status MpsStrategy::Apply(const GpuUndo& undo) {
  for (const auto& d : undo.Of<MpsUndo>().daemons) {
    NVDRA_RETURN_IF_ERROR(ApplyOne(d).Wrap("error starting MPS control daemon"));
  }
  return Status::Ok();
}

Status MpsStrategy::AwaitReady(const GpuUndo& undo, std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  // Leave time to complete the claim and answer before the kubelet's deadline.
  deadline -= std::chrono::milliseconds(500);
  for (const auto& d : undo.Of<MpsUndo>().daemons) {
    auto wait = rt_.first_poll;
    for (;;) {
      Status ready = rt_.api->CheckReady(d.ns, d.deployment, deadline);
      if (ready.ok()) break;
      const auto now = Clock::now();
      if (now + wait >= deadline) {
        return Unavailable("MPS control daemon is not yet ready: Deployment " + d.ns + "/" + d.deployment + ": " +
                           ready.message());
      }
      std::this_thread::sleep_for(wait);
      wait = std::min(wait * 2, rt_.max_poll);
    }
  }
  return Status::Ok();
}

Status MpsStrategy::RemoveDirectory(const std::string& root) {
  NVDRA_RETURN_IF_ERROR(rt_.mounter->Unmount(JoinPath(root, "shm")));
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  if (ec) return Internal("error removing directory " + root + ": " + ec.message());
  return Status::Ok();
}

Status MpsStrategy::UndoOne(const std::string& claim_uid, const MpsDaemonUndo& d) {
  if (!rt_.api || !rt_.mounter) {
    return FailedPrecondition("claim " + claim_uid + " runs MPS control daemon " + d.deployment +
                              ", but MPS is not set up (MPSSupport off or no --image-name); cannot stop it");
  }
  // The daemon first: while it runs, its GPUs stay in use.
  NVDRA_RETURN_IF_ERROR(rt_.api->Delete(d.ns, d.deployment).Wrap("failed to delete deployment " + d.deployment));
  Status first;
  for (const auto& uuid : d.exclusive_process) {
    auto gpu = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                            [&](const devices::GpuInfo& g) { return g.uuid == uuid; });
    if (gpu == inventory_.gpus.end()) {
      NVDRA_WARN("claim {}: GPU {} is gone; no compute mode to reset", claim_uid, uuid);
      continue;
    }
    Status s = control_.SetComputeMode(uuid, "DEFAULT").Wrap("error resetting compute mode to DEFAULT");
    if (!s.ok() && first.ok()) first = s;
  }
  Status removed = RemoveDirectory(d.root);
  if (!removed.ok() && first.ok()) first = removed;
  if (first.ok()) NVDRA_INFO("Stopped MPS control daemon {}/{} of claim {}", d.ns, d.deployment, claim_uid);
  return first;
}

Status MpsStrategy::Undo(const std::string& claim_uid, const GpuUndo& undo) {
  for (const auto& item : undo.Of<MpsUndo>().unreadable) {
    NVDRA_WARN("claim {}: skipping an MPS undo item this version does not understand: {}", claim_uid, item.dump());
  }
  Status first;
  for (const auto& d : undo.Of<MpsUndo>().daemons) {
    Status s = UndoOne(claim_uid, d).Wrap("error stopping MPS control daemon");
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

Result<int> MpsStrategy::SweepOrphans(const std::function<Result<std::vector<MpsDaemonUndo>>()>& owned) {
  if (!rt_.api || !rt_.mounter) return 0;
  NVDRA_ASSIGN_OR_RETURN(std::vector<std::string> deployments,
                         rt_.api->ListForNode(rt_.settings.ns, rt_.settings.node_name));
  const std::string mps_dir = JoinPath(rt_.settings.plugin_dir, "mps");
  std::vector<std::string> dirs;
  if (PathExists(mps_dir)) {
    NVDRA_ASSIGN_OR_RETURN(dirs, ListDirectory(mps_dir));
  }
  NVDRA_ASSIGN_OR_RETURN(std::vector<MpsDaemonUndo> records, owned());
  std::set<std::string> owned_deployments, owned_ids;
  for (const auto& r : records) {
    owned_deployments.insert(r.deployment);
    owned_ids.insert(r.id);
  }
  int removed = 0;
  Status first;
  for (const auto& name : deployments) {
    if (owned_deployments.count(name)) continue;
    Status s = rt_.api->Delete(rt_.settings.ns, name);
    if (s.ok()) {
      ++removed;
      NVDRA_INFO("Deleted MPS control daemon {}/{}: no claim in the ledger owns it", rt_.settings.ns, name);
    } else if (first.ok()) {
      first = s;
    }
  }
  for (const auto& id : dirs) {
    if (owned_ids.count(id)) continue;
    Status s = RemoveDirectory(JoinPath(mps_dir, id));
    if (s.ok()) {
      ++removed;
      NVDRA_INFO("Removed MPS directory {}: no claim in the ledger owns it", JoinPath(mps_dir, id));
    } else if (first.ok()) {
      first = s;
    }
  }
  if (!first.ok()) return first;
  return removed;
}

}  // namespace nvdra::gpu
