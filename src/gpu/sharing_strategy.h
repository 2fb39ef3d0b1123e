// One way several containers use one GPU (a config's sharing.strategy;
// the strategies are listed in gpu_handlers.cc). A strategy decides at Plan, before
// anything durable, what it will do to the claim's devices and writes that
// into the undo record; Apply does it at Prepare; AwaitReady waits, without
// the claim's locks, for what Apply started to become ready; Undo reverses
// it at Unprepare from the record alone. GpuKind holds no per-strategy code: a new strategy is a new file
// plus one line in gpu_handlers.cc.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "config/config_resolver.h"
#include "gpu/gpu_device_type.h"
#include "gpu/gpu_undo.h"
#include "util/status.h"

namespace nvdra::gpu {

// Whether a live claim other than `claim_uid` still holds `device` too:
// Unprepare then leaves what the device's sharers have in common (the
// time slice) alone, as upstream does.
using DeviceSharedWithOthers = std::function<bool(const std::string& device, const std::string& claim_uid)>;

class SharingStrategy {
 public:
  virtual ~SharingStrategy() = default;

  // As a config names it in sharing.strategy ("TimeSlicing").
  virtual std::string_view name() const = 0;
  // What the strategy will do for `group`'s devices, recorded in `undo`.
  // An error refuses the claim (permanent unless retryable).
  virtual Status Plan(const std::string& claim_uid, const config::ConfigGroup& group, const GpuDeviceLookup& devices,
                      GpuUndo& undo) const = 0;
  // Does what Plan recorded. Runs again after a failure, a crash or a
  // reboot, so it must be idempotent.
  virtual Status Apply(const GpuUndo& undo) = 0;
  // Whether AwaitReady has something to wait for in `undo`.
  virtual bool HasWait(const GpuUndo& undo) const { return false; }
  // Waits until what Apply started is ready, up to `deadline`; a retryable
  // error naming what is not ready then.
  virtual Status AwaitReady(const GpuUndo& undo, std::chrono::steady_clock::time_point deadline) {
    return Status::Ok();
  }
  // Reverses what `undo` records for this strategy, for `claim_uid`. Tries
  // every item even when one fails, and answers the first failure.
  virtual Status Undo(const std::string& claim_uid, const GpuUndo& undo) = 0;
};

// The strategy a config asks for ("" for none).
std::string SharingStrategyOf(const config::Config& config);

}  // namespace nvdra::gpu
