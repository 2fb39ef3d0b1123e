// The mock's dynamic MIG: MIG mode per GPU and the MIG devices created on
// it, kept in <mock root>/state/mig.json so that they outlive the plugin
// process (a MIG device created before a kill -9 is still there after the
// restart, as on real hardware). Creating a MIG device writes its GI and CI
// capability files and nvidia-cap nodes, as the driver would; destroying it
// removes them. GpuControl's MIG calls of the mock backend land here.
//
// state/mig.json: {"migMode": {"GPU-...": true}, "created": 3,
//                  "instances": [{"parentUUID": "GPU-...", "giProfileId": 19, "ciProfileId": 0,
//                                 "placementStart": 0, "placementSize": 1, "giId": 1, "ciId": 0,
//                                 "uuid": "MIG-..."}]}
#pragma once

#include <string>
#include <vector>

#include "devices/device_info.h"
#include "devices/gpu_control.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::devices {

class MockMigDevices {
 public:
  // `root`: the mock root; `gpus`: the profile's GPUs (their MIG mode at
  // first start, their MIG profiles and minors).
  MockMigDevices(std::string root, std::vector<GpuInfo> gpus);

  Result<bool> MigModeEnabled(const std::string& gpu_uuid) EXCLUDES(mu_);
  Status SetMigMode(const std::string& gpu_uuid, bool enabled) EXCLUDES(mu_);
  Result<std::vector<MigInstance>> List(const std::string& gpu_uuid) EXCLUDES(mu_);
  Result<MigInstance> Create(const std::string& gpu_uuid, int gi_profile_id, int ci_profile_id, int placement_start)
      EXCLUDES(mu_);
  Status Destroy(const std::string& gpu_uuid, int gi_id, int ci_id) EXCLUDES(mu_);

  // The GPUs with their current MIG mode and MIG devices (Discover).
  Status Overlay(NodeInventory& inventory) EXCLUDES(mu_);
  std::string state_path() const;

 private:
  struct State {
    std::vector<std::pair<std::string, bool>> mig_mode;
    std::vector<MigInstance> instances;
    int created = 0;
  };
  Result<State> Load() REQUIRES(mu_);
  Status Save(const State& s) REQUIRES(mu_);
  const GpuInfo* Gpu(const std::string& uuid) const;
  static bool ModeOf(const State& s, const std::string& uuid, bool initial);
  Status WriteCaps(int minor, int gi, int ci) const;
  void RemoveCaps(int minor, int gi, int ci) const;

  Mutex mu_;
  const std::string root_;
  const std::vector<GpuInfo> gpus_;
};

}  // namespace nvdra::devices
