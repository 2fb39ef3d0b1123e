// The plugin's part in a reload of the NVIDIA driver (docs/operations.md,
// "Driver upgrades"). A watch looks at the driver once a second on a thread
// of its own (DriverWatch: the kernel module's version file, the GPU
// operator's driver-ready marker, the driver's libraries; an NVML answer
// that the driver is not loaded wakes it at once). When the driver goes, the
// plugin lets go of it: new claims are refused with a retryable error, health
// monitoring stops, the device library lets go of NVML, and the devices are
// published tainted and streamed unhealthy. When a driver is back, the
// plugin discovers the devices and the driver's files again, builds its kind
// on them, rewrites the prepared claims' CDI specs, republishes its slices
// and resumes health monitoring. Each step's time is logged, from the moment
// the change was seen.
#include <algorithm>
#include <chrono>

#include "cmd/plugin_common/plugin_runner.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::plugin {

namespace {

using Steady = std::chrono::steady_clock;

long long MsSince(Steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - t0).count();
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

}  // namespace

// libcuda and NVML of the driver now loaded stand for the rest of its
// files: an uninstall removes them all.
void Plugin::WatchDriverLibraries() {
  watched_libraries_.clear();
  if (auto files = driver_files_->Files(); files.ok()) {
    for (const auto& m : files->libraries) {
      if (m.container_path.find("/libcuda.so.") == std::string::npos &&
          m.container_path.find("/libnvidia-ml.so.") == std::string::npos) {
        continue;
      }
      watched_libraries_.push_back(JoinPath(lib_->driver_root().container_root(), m.container_path));
    }
  }
}

Status Plugin::StartDriverWatch() {
  if (reloadable_ == nullptr) return Status::Ok();
  driver_watch_ = std::make_unique<devices::DriverWatch>(inventory_.driver_version);
  WatchDriverLibraries();
  files_generation_ = driver_files_->generation();
  PeriodicWorkerOptions o;
  o.period = std::chrono::seconds(1);
  o.run_at_start = false;
  o.name = "driver watch";
  // On the background group's thread, beside the reconciler: no thread of
  // its own (a reload's work, a few hundred milliseconds, delays the
  // group's other work that long).
  o.group = background_.get();
  driver_watcher_ = std::make_unique<PeriodicWorker>(o, [this] { return CheckDriver(); });
  driver_watcher_->Start();
  NVDRA_INFO("watching the NVIDIA driver {}: {}{}; libraries {}", inventory_.driver_version,
             lib_->driver_version_file(), lib_->driver_ready_marker().empty() ? "" : ", " + lib_->driver_ready_marker(),
             Join(watched_libraries_));
  return Status::Ok();
}

// The libraries count while their driver is loaded: the next one has files
// of its own, listed once the plugin acted on it.
devices::DriverWatchPaths Plugin::DriverPaths() const {
  return {lib_->driver_version_file(), lib_->driver_ready_marker(),
          driver_watch_->loaded() ? watched_libraries_ : std::vector<std::string>()};
}

Status Plugin::CheckDriver() {
  std::string nvml;
  {
    MutexLock l(nvml_gone_mu_);
    nvml.swap(nvml_gone_);
  }
  devices::DriverChange change;
  if (!nvml.empty()) change = driver_watch_->ObserveNvml(Unavailable(nvml));
  if (change.what == devices::DriverTransition::kNone)
    change = driver_watch_->Observe(devices::ProbeDriver(DriverPaths()));
  switch (change.what) {
    case devices::DriverTransition::kNone: CheckDriverFiles(); return Status::Ok();
    case devices::DriverTransition::kGone: OnDriverGone(change); return Status::Ok();
    case devices::DriverTransition::kBack: break;
  }
  Status s = OnDriverBack(change);
  if (!s.ok()) {
    driver_watch_->BackFailed();
    NVDRA_WARN("the NVIDIA driver {} is back but not usable yet (retrying every second): {}", change.new_version,
               s.message());
  }
  return s;
}

void Plugin::MarkAllDevices(kubelet::DeviceHealthStatus status, const std::string& message) {
  if (!options_.health_streaming) return;
  std::vector<kubelet::DeviceHealth> all;
  for (const auto& d : kind_->PublishedDevices()) all.push_back({options_.node_name, d.name, status, 0, 0, message});
  broadcaster_.Replace(all);
}

void Plugin::StopHealthMonitoring() {
  health_source_.reset();
  own_health_.reset();
}

void Plugin::OnDriverGone(const devices::DriverChange& change) {
  const Steady::time_point t0 = Steady::now();
  NVDRA_WARN("the NVIDIA driver {} went away ({}): new claims are refused until it is back", change.old_version,
             change.reason);
  reloadable_->SetGone("the NVIDIA driver is reloading (driver " + change.old_version + " went away: " + change.reason +
                       "); retry once it is back");
  StopHealthMonitoring();
  lib_->ReleaseDriver();
  const long long released_ms = MsSince(t0);
  std::vector<std::string> held = devices::FilesHeldBySelf({lib_->driver_root().container_root() + "/usr/lib",
                                                            lib_->driver_root().container_root() + "/lib",
                                                            lib_->driver_root().ContainerDevRoot() + "/dev/nvidia"});
  publisher_->Update(kind_->PublishedDevices());
  MarkAllDevices(kubelet::DeviceHealthStatus::kUnhealthy, "NVIDIA driver reloading");
  Status ev = events_->Record({"v1", "Node", "", options_.node_name, ""}, "Warning", "NvidiaDriverGone",
                              "NVIDIA driver " + change.old_version + " went away (" + change.reason + "); " + driver_ +
                                  " refuses new claims until it is back");
  if (!ev.ok()) NVDRA_VLOG(4, "event for node {} not posted: {}", options_.node_name, ev.message());
  NVDRA_INFO("driver reload timeline: gone noticed at 0 ms, driver released at {} ms (driver files still open: "
             "{}), devices tainted {}/driver-reloading at {} ms",
             released_ms, Join(held), driver_, MsSince(t0));
}

// Like the start: a GPU that did not come back is not published, and its
// claims stay until they are unprepared (from their undo records alone).
Status Plugin::OnDriverBack(const devices::DriverChange& change) {
  const Steady::time_point t0 = Steady::now();
  NVDRA_INFO("the NVIDIA driver {} is back (was {}): discovering again", change.new_version, change.old_version);
  NVDRA_RETURN_IF_ERROR(lib_->AcquireDriver().Wrap("load the driver library"));
  auto inventory = lib_->Discover();
  if (!inventory.ok()) return inventory.status().Wrap("device discovery");
  if (inventory->driver_version != change.new_version) {
    return Unavailable("discovery reports driver " + inventory->driver_version + ", the kernel module " +
                       change.new_version);
  }
  const std::string old_version = inventory_.driver_version;
  const size_t old_gpus = inventory_.gpus.size();
  inventory_ = std::move(inventory).value();
  NVDRA_RETURN_IF_ERROR(SetUpDriverFiles());
  const long long discovered_ms = MsSince(t0);
  KindContext ctx{options_,      gates_,        plugin_dir_,      *lib_,        inventory_, *cdi_,        *kube_,
                  driver_files_, *claims_view_, kind_companions_, *background_, shutdown_,  static_specs_};
  auto kind = factory_(ctx);
  if (!kind.ok()) return kind.status().Wrap("set up device kind on the new driver");
  std::shared_ptr<driver::DeviceKind> old = reloadable_->Replace(std::move(kind).value());
  old.reset();  // its sweeps stop here (calls still in flight keep it until they return)
  int errors = 0;
  const int rewritten = engine_->RewriteClaimSpecs(&errors);
  const long long specs_ms = MsSince(t0);
  publisher_->Update(kind_->PublishedDevices());
  const long long published_ms = MsSince(t0);
  WatchDriverLibraries();
  files_generation_ = driver_files_->generation();  // the specs were just written from these
  (void)StartHealthMonitoring(false);               // a failure there is logged, and claims go on without it
  MarkAllDevices(kubelet::DeviceHealthStatus::kHealthy, "");
  const std::string what = "NVIDIA driver " + old_version + " replaced by " + inventory_.driver_version + ": " +
                           std::to_string(inventory_.gpus.size()) + " GPU(s) (were " + std::to_string(old_gpus) +
                           "), " + std::to_string(rewritten) + " claim CDI spec(s) rewritten" +
                           (errors > 0 ? ", " + std::to_string(errors) + " not" : "");
  Status ev = events_->Record({"v1", "Node", "", options_.node_name, ""}, "Normal", "NvidiaDriverReloaded", what);
  if (!ev.ok()) NVDRA_VLOG(4, "event for node {} not posted: {}", options_.node_name, ev.message());
  NVDRA_INFO("{}", what);
  NVDRA_INFO("driver reload timeline: back noticed at 0 ms, devices and driver files discovered at {} ms, specs "
             "rewritten at {} ms, slices handed to the publisher at {} ms, health monitoring resumed at {} ms",
             discovered_ms, specs_ms, published_ms, MsSince(t0));
  return Status::Ok();
}

// Under a steady driver, its files or the container toolkit's can change
// (the toolkit's DaemonSet replaced: a new hook binary; a library removed).
// The cache of the driver's files notices it when a Prepare or this look
// asks for them; the specs written before are then written again with the
// files there now, and each file that is gone is logged with the specs that
// named it, and again if a spec still names it after.
void Plugin::CheckDriverFiles() {
  if (!driver_watch_->loaded() || reloadable_->gone()) return;
  if (!driver_files_->CommonEdits().ok()) return;  // the driver going: the next look at it tells
  const uint64_t generation = driver_files_->generation();
  if (generation == files_generation_) return;
  files_generation_ = generation;
  const Steady::time_point t0 = Steady::now();
  std::vector<std::string> gone = driver_files_->TakeGoneFiles();
  WarnSpecsNaming(gone, "is gone; the specs that name it are written again with the files there now");
  int errors = 0;
  const int rewritten = engine_->RewriteClaimSpecs(&errors);
  if (static_specs_) {
    if (Status s = static_specs_(); !s.ok()) {
      NVDRA_ERROR("static CDI specs not written again: {}", s.message());
      ++errors;
    }
  }
  for (const auto& f : driver_files_->MissingFiles()) {
    if (std::find(gone.begin(), gone.end(), f) == gone.end()) gone.push_back(f);
  }
  WarnSpecsNaming(gone, "does not exist, and a CDI spec still names it (its containers fail to start)");
  NVDRA_INFO("the NVIDIA driver's or the container toolkit's files changed: {} claim CDI spec(s) written again{} "
             "in {} ms",
             rewritten, errors > 0 ? ", " + std::to_string(errors) + " not" : "", MsSince(t0));
}

// One Warning per file: the file and the specs (claims by namespace, name
// and UID) of this driver that name it.
void Plugin::WarnSpecsNaming(const std::vector<std::string>& files, const std::string& why) {
  if (files.empty()) return;
  auto names = ListDirectory(options_.cdi_root);
  if (!names.ok()) return;
  const std::string prefix = "k8s." + driver_ + "-";
  const std::string claim_prefix = prefix + "claim_";
  std::vector<std::pair<std::string, std::string>> specs;  // who, text
  for (const auto& n : *names) {
    if (n.rfind(prefix, 0) != 0 || n.size() < 5 || n.compare(n.size() - 5, 5, ".json") != 0) continue;
    auto text = ReadFileToString(JoinPath(options_.cdi_root, n));
    if (!text.ok()) continue;
    std::string who = "CDI spec " + n;
    if (n.rfind(claim_prefix, 0) == 0) {
      const std::string uid = n.substr(claim_prefix.size(), n.size() - 5 - claim_prefix.size());
      auto claim = cdi_->ReadClaimSpec(uid);
      who = "claim " + (claim.ok() && !claim->name.empty() ? claim->ns + "/" + claim->name + " " : "") + uid;
    }
    specs.emplace_back(std::move(who), std::move(text).value());
  }
  for (const auto& f : files) {
    std::vector<std::string> naming;
    for (const auto& [who, text] : specs) {
      if (text.find("\"" + f + "\"") != std::string::npos) naming.push_back(who);
    }
    if (!naming.empty()) NVDRA_WARN("{} {} (named by {})", f, why, Join(naming));
  }
}

}  // namespace nvdra::plugin
