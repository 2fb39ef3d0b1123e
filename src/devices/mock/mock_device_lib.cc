#include "devices/mock/mock_device_lib.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <sstream>

#include "devices/device_names.h"
#include "devices/mock/mock_driver_install.h"
#include "devices/mock/mock_fabric_manager.h"
#include "devices/mock/mock_mig_devices.h"
#include "devices/mock/mock_pci_sysfs.h"
#include "devices/nvcaps.h"
#include "devices/pcie_root.h"
#include "util/file_util.h"
#include "util/log.h"
#include "util/parse_number.h"

namespace nvdra::devices {

namespace {

class MockGpuControl final : public GpuControl {
 public:
  MockGpuControl(std::string log_path, std::string failures_path, std::vector<std::string> uuids,
                 std::shared_ptr<MockMigDevices> migs)
      : log_path_(std::move(log_path)),
        failures_path_(std::move(failures_path)),
        uuids_(std::move(uuids)),
        migs_(std::move(migs)) {}

  Status SetTimeSlice(const std::string& uuid, int interval) override {
    NVDRA_RETURN_IF_ERROR(ValidateTimeSlice(interval));
    return Record(uuid, "SetTimeSlice " + uuid + " " + std::to_string(interval));
  }
  Status SetComputeMode(const std::string& uuid, const std::string& mode) override {
    NVDRA_RETURN_IF_ERROR(ValidateComputeMode(mode));
    return Record(uuid, "SetComputeMode " + uuid + " " + mode);
  }
  Result<bool> MigModeEnabled(const std::string& uuid) override { return migs_->MigModeEnabled(uuid); }
  Status SetMigMode(const std::string& uuid, bool enabled) override {
    NVDRA_RETURN_IF_ERROR(migs_->SetMigMode(uuid, enabled));
    return Record(uuid, "SetMigMode " + uuid + " " + (enabled ? "1" : "0"));
  }
  Result<std::vector<MigInstance>> ListMigInstances(const std::string& uuid) override { return migs_->List(uuid); }
  Result<MigInstance> CreateMigInstance(const std::string& uuid, int gi_profile, int ci_profile, int start) override {
    NVDRA_RETURN_IF_ERROR(Injected(uuid, "CreateMigInstance"));
    NVDRA_ASSIGN_OR_RETURN(MigInstance m, migs_->Create(uuid, gi_profile, ci_profile, start));
    NVDRA_RETURN_IF_ERROR(Record(uuid, "CreateMigInstance " + uuid + " " + std::to_string(gi_profile) + " " +
                                           std::to_string(start) + " gi " + std::to_string(m.gi_id)));
    return m;
  }
  Status DestroyMigInstance(const std::string& uuid, int gi, int ci) override {
    NVDRA_RETURN_IF_ERROR(migs_->Destroy(uuid, gi, ci));
    return Record(uuid, "DestroyMigInstance " + uuid + " gi " + std::to_string(gi) + " ci " + std::to_string(ci));
  }
  Status SetPersistenceMode(const std::string& uuid, bool enabled) override {
    return Record(uuid, "SetPersistenceMode " + uuid + " " + (enabled ? "1" : "0"));
  }

 private:
  // Injected failures: one GPU UUID (or "*" for all) per line of the file,
  // read on every call so a test can fail and heal a GPU while it runs.
  Status Injected(const std::string& uuid, const std::string& line) const {
    if (auto failures = ReadFileToString(failures_path_); failures.ok()) {
      std::istringstream in(*failures);
      for (std::string w; in >> w;) {
        if (w == uuid || w == "*") {
          return Internal("command \"nvidia-smi " + line + "\" failed (exit 15): Unable to set on " + uuid +
                          ": Unknown Error (injected by " + failures_path_ + ")");
        }
      }
    }
    return Status::Ok();
  }
  Status Record(const std::string& uuid, const std::string& line) EXCLUDES(mu_) {
    if (std::find(uuids_.begin(), uuids_.end(), uuid) == uuids_.end()) {
      return NotFound("no GPU with UUID " + uuid + " on this (mock) node");
    }
    if (!line.starts_with("SetMigMode") && !line.starts_with("CreateMig") && !line.starts_with("DestroyMig")) {
      NVDRA_RETURN_IF_ERROR(Injected(uuid, line));
    }
    MutexLock l(mu_);
    int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return Internal("opening mock control log " + log_path_ + ": " + ErrnoText(errno));
    std::string text = line + "\n";
    ssize_t n = ::write(fd, text.data(), text.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size())) return Internal("writing mock control log " + log_path_);
    return Status::Ok();
  }
  Mutex mu_;  // one writer at a time, so log lines never interleave
  std::string log_path_;
  std::string failures_path_;
  std::vector<std::string> uuids_;
  std::shared_ptr<MockMigDevices> migs_;
};

}  // namespace

int MockDeviceLib::MigGiCapMinor(int gpu_minor, int gi) { return 100 + gpu_minor * 200 + gi * 10; }
int MockDeviceLib::MigCiCapMinor(int gpu_minor, int gi, int ci) { return MigGiCapMinor(gpu_minor, gi) + 1 + ci; }

Result<MockLayout> ParseMockLayout(const std::string& name) {
  if (name.empty() || name == "plain") return MockLayout::kPlain;
  if (name == "gpu-operator") return MockLayout::kGpuOperator;
  return InvalidArgument("unknown mock layout \"" + name + "\" (plain, gpu-operator)");
}

namespace {

bool SameDirectory(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && S_ISDIR(sa.st_mode) && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// The operator validator's status file, with its keys: a driver container's
// driver at /run/nvidia/driver, device nodes on the host's /dev (the
// validator sees the host's root at /host).
constexpr const char* kDriverReadyContent = "IS_HOST_DRIVER=false\n"
                                            "NVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"
                                            "DRIVER_ROOT_CTR_PATH=/run/nvidia/driver\n"
                                            "NVIDIA_DEV_ROOT=/\n"
                                            "DEV_ROOT_CTR_PATH=/host\n";

}  // namespace

MockDeviceLib::MockDeviceLib(MockProfile profile, std::string root, DriverRoot driver_root, MockLayout layout,
                             XidPolicy xids)
    : profile_(std::move(profile)),
      dir_(std::move(root)),
      root_(std::move(driver_root)),
      layout_(layout),
      xids_(std::move(xids)) {}

Result<std::unique_ptr<FabricManager>> MockDeviceLib::OpenFabricManager() {
  if (profile_.fabric_partitions.empty()) return std::unique_ptr<FabricManager>();
  return std::unique_ptr<FabricManager>(std::make_unique<MockFabricManager>(profile_.fabric_partitions, dir_));
}

Result<std::unique_ptr<MockDeviceLib>> MockDeviceLib::Create(MockProfile profile, const std::string& root,
                                                             XidPolicy xids, const std::string& host_root) {
  return Create(std::move(profile), root, std::move(xids), MockNodeOptions{.host_root = host_root});
}

Result<std::unique_ptr<MockDeviceLib>> MockDeviceLib::Create(MockProfile profile, const std::string& root,
                                                             XidPolicy xids, const MockNodeOptions& node) {
  if (root.empty() || root.front() != '/') {
    return InvalidArgument("mock driver root \"" + root + "\" must be an absolute path");
  }
  // The plain mock is its own dev root; the operator's node keeps the
  // nodes on its own dev/, outside the driver root.
  DriverRoot driver_root(root, node.host_root.empty() ? root : node.host_root, root,
                         node.host_root.empty() ? root : node.host_root);
  if (node.layout == MockLayout::kGpuOperator) {
    const std::string drv = JoinPath(root, kGpuOperatorDriverRoot);
    NVDRA_RETURN_IF_ERROR(MakeDirectories(drv, 0755));
    const bool mounted = !node.container_driver_root.empty() && SameDirectory(node.container_driver_root, drv);
    driver_root = DriverRoot(mounted ? node.container_driver_root : drv,
                             mounted && !node.host_driver_root.empty() ? node.host_driver_root : drv, root, root);
  }
  auto lib = std::unique_ptr<MockDeviceLib>(new MockDeviceLib(std::move(profile), root, std::move(driver_root),
                                                              node.layout, std::move(xids)));
  NVDRA_RETURN_IF_ERROR(lib->Build().Wrap("building mock driver root in " + root));
  std::vector<std::string> uuids;
  for (const auto& g : lib->profile_.inventory.gpus) uuids.push_back(g.uuid);
  lib->migs_ = std::make_shared<MockMigDevices>(root, lib->profile_.inventory.gpus);
  lib->control_ = std::make_unique<MockGpuControl>(lib->control_log_path(), lib->control_failures_path(),
                                                   std::move(uuids), lib->migs_);
  lib->pci_ = std::make_unique<SysfsPciDriverControl>(JoinPath(root, "sys"), MockPciKernel(root));
  return lib;
}

std::string MockDeviceLib::proc_devices_path() const { return JoinPath(dir_, "proc/devices"); }
std::string MockDeviceLib::capabilities_dir() const { return JoinPath(dir_, kCapabilitiesDir); }
std::string MockDeviceLib::health_events_path() const { return JoinPath(dir_, "health-events"); }
std::string MockDeviceLib::control_log_path() const { return JoinPath(dir_, "state/control.log"); }
std::string MockDeviceLib::control_failures_path() const { return JoinPath(dir_, "control-failures"); }

Status MockDeviceLib::Build() {
  const std::string dev = JoinPath(dir_, "dev");
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(dev, "nvidia-caps"), 0755));
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(dev, "nvidia-caps-imex-channels"), 0755));
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(dir_, "state"), 0755));
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(dir_, "proc/driver/nvidia/capabilities"), 0755));
  NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(dev, "nvidiactl"), kMockNvidiaMajor, 255, 0666));
  NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(dev, "nvidia-uvm"), kMockUvmMajor, 0, 0666));
  NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(dev, "nvidia-uvm-tools"), kMockUvmMajor, 1, 0666));
  // The channels' major as the module now loaded registered it; none while
  // the driver is unloaded.
  const bool loaded = MockDriverVersionNow(dir_, profile_.inventory.driver_version) != kMockDriverGone;
  const int imex_major = MockImexChannelsMajorNow(dir_);
  std::string procdev = "Character devices:\n"
                        "  1 mem\n"
                        "195 nvidia-frontend\n" +
                        (loaded ? std::to_string(imex_major) + " nvidia-caps-imex-channels\n" : std::string()) +
                        std::to_string(kMockCapsMajor) + " nvidia-caps\n" + std::to_string(kMockUvmMajor) +
                        " nvidia-uvm\n"
                        "\nBlock devices:\n  8 sd\n";
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(proc_devices_path(), procdev, 0644, false));
  const std::string caps = capabilities_dir();
  for (const auto& g : profile_.inventory.gpus) {
    NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(dev, "nvidia" + std::to_string(g.minor)), kMockNvidiaMajor,
                                             g.minor, 0666));
    for (const auto& m : g.migs) {
      int gi_minor = MigGiCapMinor(g.minor, m.gi_id), ci_minor = MigCiCapMinor(g.minor, m.gi_id, m.ci_id);
      std::string gi_path = JoinPath(caps, MigGiAccessPath(g.minor, m.gi_id));
      std::string ci_path = JoinPath(caps, MigCiAccessPath(g.minor, m.gi_id, m.ci_id));
      NVDRA_RETURN_IF_ERROR(MakeDirectories(ci_path.substr(0, ci_path.rfind('/')), 0755));
      NVDRA_RETURN_IF_ERROR(WriteFileAtomically(gi_path,
                                                "DeviceFileMinor: " + std::to_string(gi_minor) +
                                                    "\nDeviceFileMode: 292\nDeviceFileModify: 1\n",
                                                0444, false));
      NVDRA_RETURN_IF_ERROR(WriteFileAtomically(ci_path,
                                                "DeviceFileMinor: " + std::to_string(ci_minor) +
                                                    "\nDeviceFileMode: 292\nDeviceFileModify: 1\n",
                                                0444, false));
      NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(dev, "nvidia-caps/nvidia-cap" + std::to_string(gi_minor)),
                                               kMockCapsMajor, gi_minor, 0444));
      NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(dev, "nvidia-caps/nvidia-cap" + std::to_string(ci_minor)),
                                               kMockCapsMajor, ci_minor, 0444));
    }
  }
  NVDRA_RETURN_IF_ERROR(BuildMockPciSysfs(dir_, profile_.inventory.gpus));
  if (!profile_.inventory.clique_id.empty()) {
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(caps, kFabricImexMgmtCap),
                                              "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n", 0444,
                                              false));
    NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(dev, "nvidia-caps/nvidia-cap1"), kMockCapsMajor, 1, 0400));
  }
  for (int c = 0; c < profile_.imex_channels; ++c) {
    NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(dev, "nvidia-caps-imex-channels/channel" + std::to_string(c)),
                                             imex_major, c, 0666));
  }
  NVDRA_RETURN_IF_ERROR(BuildDriver(MockDriverVersionNow(dir_, profile_.inventory.driver_version)));
  if (!PathExists(health_events_path())) {
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(health_events_path(), "", 0644, false));
  }
  return Status::Ok();
}

// The driver's user-space files, then the kernel module's version file and
// the validator's marker, as a driver install leaves them; nothing while
// the driver is swapped out.
Status MockDeviceLib::BuildDriver(const std::string& version) {
  if (version == kMockDriverGone) return Status::Ok();
  MockProfile profile = profile_;
  profile.inventory.driver_version = version;
  if (layout_ == MockLayout::kGpuOperator) {
    const std::string drv = JoinPath(dir_, kGpuOperatorDriverRoot);
    // A driver container's root has a dev/ of its own (here empty).
    NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(drv, "dev"), 0755));
    NVDRA_RETURN_IF_ERROR(BuildMockDriverInstall({.driver_root = drv, .dev_root = dir_}, profile));
  } else {
    NVDRA_RETURN_IF_ERROR(BuildMockDriverInstall(dir_, profile));
  }
  const std::string text = MockKernelVersionText(version);
  if (auto now = ReadFileToString(driver_version_file()); !now.ok() || *now != text) {
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(driver_version_file(), text, 0444, false));
  }
  // Last, as the validator writes it once the driver works.
  const std::string ready = driver_ready_marker();
  if (!ready.empty() && !PathExists(ready)) {
    NVDRA_RETURN_IF_ERROR(MakeDirectories(ready.substr(0, ready.rfind('/')), 0755));
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(ready, kDriverReadyContent, 0644, false));
  }
  return Status::Ok();
}

int MockImexChannelsMajorNow(const std::string& root) {
  auto text = ReadFileToString(JoinPath(root, kMockImexChannelsMajorFile));
  if (!text.ok()) return kMockImexChannelsMajor;
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  auto major = ParseInt32(t);
  return major.ok() && *major > 0 ? *major : kMockImexChannelsMajor;
}

std::string MockDriverVersionNow(const std::string& root, const std::string& profile_version) {
  auto state = ReadFileToString(JoinPath(root, kMockDriverStateFile));
  if (!state.ok()) return profile_version;
  std::string v = *state;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v.empty() ? profile_version : v;
}

std::string MockDeviceLib::driver_version_file() const { return JoinPath(dir_, kMockKernelVersionFile); }
std::string MockDeviceLib::driver_ready_marker() const {
  return layout_ == MockLayout::kGpuOperator ? JoinPath(dir_, kGpuOperatorDriverReady) : "";
}

namespace {

// The module unloaded: /proc/devices no longer lists the channels.
Status DropImexChannelsMajor(const std::string& proc_devices) {
  auto text = ReadFileToString(proc_devices);
  if (!text.ok()) return Status::Ok();
  std::string kept;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" nvidia-caps-imex-channels") == std::string::npos) kept += line + "\n";
  }
  return WriteFileAtomically(proc_devices, kept, 0644, false);
}

}  // namespace

Status SwapMockDriver(const std::string& root, MockLayout layout, const MockProfile& profile,
                      const std::string& version, int imex_channels_major) {
  if (version.empty() || version.find('/') != std::string::npos || version.find('\n') != std::string::npos) {
    return InvalidArgument("mock driver version \"" + version + "\" is not usable");
  }
  const std::string now = MockDriverVersionNow(root, profile.inventory.driver_version);
  const std::string state = JoinPath(root, kMockDriverStateFile);
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(root, "state"), 0755));
  if (now != kMockDriverGone && now != version) {
    // Unloaded first: the state says so before anything goes, so that a
    // discovery meanwhile does not put the old files back.
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(state, std::string(kMockDriverGone) + "\n", 0644, true));
    ::unlink(JoinPath(root, kMockKernelVersionFile).c_str());
    if (layout == MockLayout::kGpuOperator) ::unlink(JoinPath(root, kGpuOperatorDriverReady).c_str());
    const std::string drv = layout == MockLayout::kGpuOperator ? JoinPath(root, kGpuOperatorDriverRoot) : root;
    NVDRA_RETURN_IF_ERROR(RemoveMockDriverInstall(drv, now).Wrap("removing mock driver " + now));
    NVDRA_RETURN_IF_ERROR(DropImexChannelsMajor(JoinPath(root, "proc/devices")));
  }
  if (version == kMockDriverGone) return Status::Ok();
  if (imex_channels_major > 0) {
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(root, kMockImexChannelsMajorFile),
                                              std::to_string(imex_channels_major) + "\n", 0644, true));
  }
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(state, version + "\n", 0644, true));
  // Building the node installs the new version's files, then its version
  // file and marker.
  auto lib = MockDeviceLib::Create(profile, root, XidPolicy(), MockNodeOptions{.layout = layout});
  return lib.ok() ? Status::Ok() : lib.status();
}

Result<NodeInventory> MockDeviceLib::Discover() {
  // The fake root may live on tmpfs that was wiped: rebuild what is missing,
  // like a driver reload would.
  NVDRA_RETURN_IF_ERROR(Build().Wrap("refreshing mock driver root"));
  const std::string version = MockDriverVersionNow(dir_, profile_.inventory.driver_version);
  if (version == kMockDriverGone) {
    // What NVML answers between the unload of a driver and the next load.
    return Unavailable("nvmlInit_v2: Driver Not Loaded (NVML_ERROR_DRIVER_NOT_LOADED, 9): the NVIDIA driver is "
                       "not loaded (mock driver swapped out)");
  }
  NodeInventory inv = profile_.inventory;
  inv.driver_version = version;
  for (auto& g : inv.gpus) g.driver_version = version;
  // MIG mode and the MIG devices as dynamic MIG left them.
  NVDRA_RETURN_IF_ERROR(migs_->Overlay(inv));
  // pcieRoot comes from the fake sysfs, through the same code as on real
  // hardware.
  for (auto& g : inv.gpus) {
    g.pcie_root = PcieRootForBusId(JoinPath(dir_, "sys"), g.pci_bus_id);
    g.numa_node = NumaNodeForBusId(JoinPath(dir_, "sys"), g.pci_bus_id);
  }
  // As NVML: a GPU bound to vfio-pci, or to no driver, is not there.
  std::erase_if(inv.gpus, [&](const GpuInfo& g) {
    auto s = pci_->Read(g.pci_bus_id);
    return s.ok() && s->driver != kNvidiaPciDriver;
  });
  return inv;
}

std::unique_ptr<DeviceHealthSource> MockDeviceLib::NewHealthSource() {
  return std::make_unique<MockHealthSource>(health_events_path(), xids_);
}

MockHealthSource::MockHealthSource(std::string events_path, XidPolicy policy)
    : path_(std::move(events_path)),
      policy_(std::move(policy)),
      // Polling a small file is cheap and works on every file system.
      poller_({.period = std::chrono::milliseconds(500),
               .run_at_start = false,
               .name = "the mock health event poll",
               .thread_name = "mock-health"},
              [this] {
                Status s = PollOnce();
                if (!s.ok()) NVDRA_WARN("mock health events: {}", s.ToString());
                return s;
              }) {}

MockHealthSource::~MockHealthSource() { Stop(); }

void MockHealthSource::HandleLine(const std::string& line) {
  std::istringstream in(line);
  std::string device, what;
  if (!(in >> device >> what) || device.front() == '#') return;
  // A GPU name addresses all of its MIG devices when MIG is on.
  std::vector<std::string> targets = {device};
  for (const auto& g : inventory_.gpus) {
    if (GpuDeviceName(g.minor) == device) targets = AffectedDevices(g, std::nullopt, std::nullopt);
  }
  DeviceHealthEvent ev;
  if (what == "lost") {
    ev.state = HealthState::kUnhealthy;
    ev.message = "GPU lost";
  } else if (what == "unmonitored") {
    ev.state = HealthState::kUnmonitored;
    ev.message = "health events not available";
  } else if (what == "healthy") {
    ev.state = HealthState::kHealthy;
    ev.message = "recovered";
  } else {
    Result<uint64_t> parsed = ParseUint64(what);
    if (!parsed.ok()) {
      NVDRA_WARN("mock health events: ignoring line \"{}\"", line);
      return;
    }
    const uint64_t xid = *parsed;
    bool critical = policy_.IsCritical(xid);
    ev.state = critical ? HealthState::kUnhealthy : HealthState::kNotice;
    ev.xid = xid;
    ev.message = "XID " + std::to_string(xid) + (critical ? " (critical)" : " (ignored)");
  }
  for (const auto& t : targets) {
    ev.device = t;
    callback_(ev);
  }
}

Status MockHealthSource::PollOnce() {
  auto text = ReadFileToString(path_);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return Status::Ok();
    return text.status();
  }
  if (text->size() < offset_) offset_ = 0;  // truncated: start over
  // Only complete lines; a line being appended is picked up next time.
  size_t end = text->rfind('\n');
  if (end == std::string::npos || end + 1 <= offset_) return Status::Ok();
  std::istringstream in(text->substr(offset_, end + 1 - offset_));
  offset_ = end + 1;
  std::string line;
  while (std::getline(in, line)) HandleLine(line);
  return Status::Ok();
}

void MockHealthSource::Register(const NodeInventory& inventory, HealthCallback callback) {
  inventory_ = inventory;
  callback_ = std::move(callback);
}

Status MockHealthSource::Start(const NodeInventory& inventory, HealthCallback callback) {
  if (started_) return FailedPrecondition("mock health source already started");
  Register(inventory, std::move(callback));
  NVDRA_RETURN_IF_ERROR(PollOnce());
  started_ = true;
  poller_.Start();
  return Status::Ok();
}

void MockHealthSource::Stop() {
  poller_.Stop();
  started_ = false;
}

}  // namespace nvdra::devices
