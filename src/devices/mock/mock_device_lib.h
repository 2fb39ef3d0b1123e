// The mock backend: hardware from a MockProfile, plus a fake driver root
// built in a directory of ours (dev nodes, /proc/devices, nvcaps access
// files, sysfs links for pcieRoot) so that device-node lookups, CDI edits and
// IMEX channel handling run the same code as on real hardware. Device nodes
// are real character devices when we may mknod, regular files otherwise.
//
// Layout under the mock root (see docs/mock-hardware.md):
//   dev/nvidia<N> dev/nvidiactl dev/nvidia-uvm dev/nvidia-uvm-tools
//   dev/nvidia-caps/nvidia-cap<M> dev/nvidia-caps-imex-channels/channel<C>
//   proc/devices proc/driver/nvidia/capabilities/{gpu<N>/mig/gi<G>[/ci<C>]/access,fabric-imex-mgmt}
//   sys/bus/pci/..., sys/kernel/iommu_groups, dev/vfio  the fake PCI sysfs (mock_pci_sysfs.h)
//   health-events          lines "<device> <xid>|lost|unmonitored" to inject
//   state/control.log      one line per GpuControl call
//   state/mig.json         MIG mode and the MIG devices dynamic MIG created (mock_mig_devices.h)
//   state/fabric-manager.* the active Fabric Manager partitions (mock_fabric_manager.h)
//   control-failures       GPU UUIDs (or "*") whose GpuControl calls fail, to inject
//   the driver's user-space files and DRM nodes (mock_driver_install.h)
//
// The GPU operator's layout (MockLayout::kGpuOperator) lays the root out as a
// node whose driver the operator's driver container provides: the root is the
// node's "/", with the kernel's parts above (dev/, proc/, sys/) and the
// mock's own files (state/, health-events, ...) where they are for the plain
// layout, but
//   run/nvidia/driver/...                  the driver's files (an empty dev/
//                                          as a container image's; the nodes
//                                          are on the node's dev/)
//   nothing in usr/bin (the toolkit, when installed, is in
//                                          usr/local/nvidia/toolkit; the
//                                          plugins bring their own hook)
//   run/nvidia/validations/driver-ready    the operator validator's marker
//
// Both layouts have the kernel module's proc/driver/nvidia/version while the
// driver is loaded, and state/driver-version once the driver was swapped
// (SwapMockDriver): the version the node runs since, or "gone" between an
// unload and the next install.
#pragma once

#include "devices/device_lib.h"
#include "devices/mock/mock_mig_devices.h"
#include "devices/mock/mock_profile.h"
#include "util/periodic_worker.h"

namespace nvdra::devices {

// Majors the fake /proc/devices announces.
inline constexpr int kMockNvidiaMajor = 195;
inline constexpr int kMockUvmMajor = 510;
inline constexpr int kMockCapsMajor = 236;
inline constexpr int kMockImexChannelsMajor = 235;

enum class MockLayout {
  kPlain,        // everything in one directory, the driver root
  kGpuOperator,  // a node laid out as the GPU operator lays it out
};
// "" or "plain", "gpu-operator".
Result<MockLayout> ParseMockLayout(const std::string& name);

// Paths in a GPU operator node.
inline constexpr const char* kGpuOperatorDriverRoot = "/run/nvidia/driver";
inline constexpr const char* kGpuOperatorDriverReady = "/run/nvidia/validations/driver-ready";

// The mock node's driver swap state, relative to the mock's root.
inline constexpr const char* kMockDriverStateFile = "state/driver-version";
inline constexpr const char* kMockDriverGone = "gone";
// The major the loaded module gave nvidia-caps-imex-channels, once a swap
// set one (kMockImexChannelsMajor before).
inline constexpr const char* kMockImexChannelsMajorFile = "state/imex-channels-major";

// The driver version the mock node under `root` runs: the swap state's, else
// `profile_version`; kMockDriverGone while none is loaded.
std::string MockDriverVersionNow(const std::string& root, const std::string& profile_version);
// The nvidia-caps-imex-channels major of the mock node under `root`.
int MockImexChannelsMajorNow(const std::string& root);

struct MockNodeOptions {
  MockLayout layout = MockLayout::kPlain;
  // Plain: where the host sees the root when it is mounted into a container
  // (CDI specs name host paths); empty: the same path.
  std::string host_root;
  // GPU operator: the driver root as this process has it mounted (a plugin
  // container's /driver-root) and as the host sees it. Used when that mount
  // shows the node's run/nvidia/driver; else that directory is both.
  std::string container_driver_root;
  std::string host_driver_root;
};

class MockDeviceLib final : public DeviceLib {
 public:
  // Builds (or refreshes) the fake driver root under `root`. `host_root` is
  // where the host sees that directory when it is mounted into a container
  // (CDI specs name host paths); empty: the same path.
  static Result<std::unique_ptr<MockDeviceLib>> Create(MockProfile profile, const std::string& root,
                                                       XidPolicy xids = XidPolicy(), const std::string& host_root = "");
  // Builds (or refreshes) the mock node under `root` in `node.layout`.
  static Result<std::unique_ptr<MockDeviceLib>> Create(MockProfile profile, const std::string& root, XidPolicy xids,
                                                       const MockNodeOptions& node);

  Result<NodeInventory> Discover() override;
  GpuControl& control() override { return *control_; }
  PciDriverControl& pci() override { return *pci_; }
  // The profile's partitions (mock_fabric_manager.h); none: no fabric.
  Result<std::unique_ptr<FabricManager>> OpenFabricManager() override;
  std::unique_ptr<DeviceHealthSource> NewHealthSource() override;
  const DriverRoot& driver_root() const override { return root_; }
  std::string proc_devices_path() const override;
  std::string capabilities_dir() const override;
  std::string backend_name() const override { return "mock:" + profile_.name; }
  bool device_nodes_may_be_files() const override { return true; }
  // The recording stand-in, as if the plugin image shipped it.

  const MockProfile& profile() const { return profile_; }
  std::string health_events_path() const;
  // The kernel module's version file and, in the GPU operator's layout, the
  // validator's driver-ready marker ("" in the plain layout).
  std::string driver_version_file() const override;
  std::string driver_ready_marker() const override;
  std::string control_log_path() const;
  std::string control_failures_path() const;

  // nvcaps minors the fake driver assigns (stable per GPU/GI/CI).
  static int MigGiCapMinor(int gpu_minor, int gi);
  static int MigCiCapMinor(int gpu_minor, int gi, int ci);

 private:
  MockDeviceLib(MockProfile profile, std::string root, DriverRoot driver_root, MockLayout layout, XidPolicy xids);
  Status Build();
  Status BuildDriver(const std::string& version);
  MockProfile profile_;
  std::string dir_;  // the mock's root: the driver root (plain) or the node's "/"
  DriverRoot root_;
  MockLayout layout_;
  XidPolicy xids_;
  std::shared_ptr<MockMigDevices> migs_;
  std::unique_ptr<GpuControl> control_;
  std::unique_ptr<PciDriverControl> pci_;
};

// Swaps the driver of the mock node under `root` (built with `profile` in
// `layout`) as a driver upgrade does, while plugins run on it:
// kMockDriverGone unloads it (the version file and the driver-ready marker
// go, the driver's versioned files are removed, and discovery answers
// NVML_ERROR_DRIVER_NOT_LOADED); a version installs that version's files,
// then writes the version file and the marker, unloading the running one
// first when it is another. While the driver is gone /proc/devices lists no
// nvidia-caps-imex-channels; `imex_channels_major` > 0 is the major the new
// module registers it with (a module load may assign another one; the
// channel nodes already under dev/ keep the old one, as on a real node).
Status SwapMockDriver(const std::string& root, MockLayout layout, const MockProfile& profile,
                      const std::string& version, int imex_channels_major = 0);

// Reads injected events from the mock's health-events file; every line is
// handled once.
class MockHealthSource final : public DeviceHealthSource {
 public:
  MockHealthSource(std::string events_path, XidPolicy policy);
  ~MockHealthSource() override;
  Status Start(const NodeInventory& inventory, HealthCallback callback) override;
  void Stop() override;
  // The pieces Start uses, callable without a thread: Register sets the
  // devices and the callback; PollOnce handles lines appended since the
  // last call.
  void Register(const NodeInventory& inventory, HealthCallback callback);
  Status PollOnce();

 private:
  void HandleLine(const std::string& line);
  std::string path_;
  XidPolicy policy_;
  NodeInventory inventory_;
  HealthCallback callback_;
  size_t offset_ = 0;
  bool started_ = false;
  // Last: it stops before the state its polls use goes away.
  PeriodicWorker poller_;
};

}  // namespace nvdra::devices
