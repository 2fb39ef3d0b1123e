// The time-slice resets the GPU kind owes its GPUs. Unprepare resets the
// time slice a claim set, through nvidia-smi, which can keep failing (a GPU
// that stopped answering, a driver being replaced). Giving up at the first
// failure would leave a GPU with another claim's sharing setting; retrying
// for ever wedges the claim (the kubelet repeats a failed Unprepare, the pod
// never finishes and the claim is never released). So a claim gets a
// bounded number of attempts per GPU; after that the claim is released and
// the GPU owes the reset instead: it is reported unhealthy (the taint
// gpu.nvidia.com/time-slice-reset-failed and a health event) and the reset
// is retried in the background until it succeeds, or until a new claim's
// Prepare sets the GPU's time slice itself (the setting is then that
// claim's, and its own Unprepare resets it).
//
// Attempts and owed resets are kept in a small JSON file beside the ledger:
// after a restart nothing else remembers what a released claim left on a GPU,
// and a restart must not hand a claim a fresh set of attempts either.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/device_health.h"
#include "devices/gpu_control.h"
#include "model/published_device.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::gpu {

inline constexpr const char* kTimeSliceResetTaintKey = "gpu.nvidia.com/time-slice-reset-failed";

struct TimeSliceResetOptions {
  // Failed resets of one GPU a claim's Unprepare reports to the kubelet
  // before the claim is released and the GPU owes the reset.
  int max_attempts = 3;
  // Where attempts and owed resets persist; "" keeps them in memory only.
  std::string state_path;
};

class TimeSliceResets {
 public:
  TimeSliceResets(devices::GpuControl& control, TimeSliceResetOptions options);

  // Prepare's setting of `uuid`'s sharing (compute mode DEFAULT, then the
  // interval). On success the GPU owes no reset any more: its setting is
  // the new claim's.
  Status Apply(const std::string& device, const std::string& uuid, int interval) EXCLUDES(mu_, report_mu_);

  // Unprepare's reset of `uuid` (published as `device`) for `claim_uid`. Ok
  // once reset, and also once the claim used up its attempts (the GPU owes
  // the reset from then on); otherwise the failure, for the kubelet to retry.
  Status ResetForClaim(const std::string& claim_uid, const std::string& device, const std::string& uuid)
      EXCLUDES(mu_, report_mu_);

  // Tries every owed reset once; an error when one still fails.
  Status RetryOwed() EXCLUDES(mu_, report_mu_);

  // `devices` with the taint of each GPU that owes a reset.
  std::vector<model::PublishedDevice> Decorate(std::vector<model::PublishedDevice> devices) const EXCLUDES(mu_);
  // Device names of the GPUs that owe a reset.
  std::vector<std::string> OwingDevices() const EXCLUDES(mu_);

  // Where health changes go (unhealthy when a GPU starts owing a reset,
  // healthy when it no longer does); null: nowhere. Reports happen outside
  // the bookkeeping lock, so the callback may call Decorate.
  void SetReporter(devices::HealthCallback report) EXCLUDES(report_mu_);

 private:
  // Serialises the control calls on one GPU (a background retry must not
  // reset a time slice a Prepare is setting) without blocking other GPUs.
  Mutex& LockOf(const std::string& uuid) EXCLUDES(mu_);
  // Records that `uuid` no longer owes a reset; true if it did.
  bool ClearOwedLocked(const std::string& uuid) REQUIRES(mu_);
  void Report(const devices::DeviceHealthEvent& event) EXCLUDES(report_mu_);
  void Load() EXCLUDES(mu_);
  void SaveLocked() REQUIRES(mu_);

  devices::GpuControl& control_;
  const TimeSliceResetOptions options_;

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Mutex>> gpu_locks_ GUARDED_BY(mu_);  // by UUID
  std::map<std::string, int> attempts_ GUARDED_BY(mu_);                      // "<claim>/<uuid>" -> failures
  std::map<std::string, std::string> owed_ GUARDED_BY(mu_);                  // UUID -> device name

  Mutex report_mu_;  // held while reporting, so SetReporter(nullptr) waits for a report in flight
  devices::HealthCallback report_ GUARDED_BY(report_mu_);
};

}  // namespace nvdra::gpu
