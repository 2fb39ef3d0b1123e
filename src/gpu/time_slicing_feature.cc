// Time-slicing (time_slicing_strategy.h) as a plug-in of the GPU kind: the
// strategy's steps, and the time-slice resets it owns (time_slice_resets.h):
// a GPU that owes one is published unhealthy, and the plug-in's health
// source retries the owed resets in the background.
#include "gpu/feature_adapters.h"
#include "gpu/gpu_handlers.h"
#include "gpu/time_slicing_strategy.h"
#include "util/periodic_worker.h"

namespace nvdra::gpu {

namespace {

const UndoPieceCodec& TimeSlicingPieceCodec() {
  static const UndoPieceCodec codec = TimeSlicingUndoCodec();
  return codec;
}

// The background retry of owed time-slice resets, as a health source: the
// plugin owns its lifetime like the hardware's, so its reports stop before
// what they feed (the slice publisher, the health stream) is taken down.
class OwedResetRetry final : public devices::DeviceHealthSource {
 public:
  OwedResetRetry(TimeSliceResets& resets, std::chrono::milliseconds period, PeriodicGroup* group)
      : resets_(resets), period_(period), group_(group) {}
  ~OwedResetRetry() override { Stop(); }

  Status Start(const devices::NodeInventory&, devices::HealthCallback callback) override {
    resets_.SetReporter(callback);
    for (const auto& device : resets_.OwingDevices()) {
      callback({device, devices::HealthState::kUnhealthy, std::nullopt,
                "owes a time-slice reset from before the plugin restarted"});
    }
    PeriodicWorkerOptions o;
    o.period = period_;
    o.jitter = 0.1;
    o.run_at_start = false;
    o.name = "time-slice reset retry";
    o.thread_name = "reset-retry";
    // A retry runs only while a GPU owes a reset, which is rare: it runs on
    // the background thread rather than keeping one of its own.
    o.group = group_;
    worker_ = std::make_unique<PeriodicWorker>(o, [this] { return resets_.RetryOwed(); });
    worker_->Start();
    return Status::Ok();
  }
  void Stop() override {
    worker_.reset();
    resets_.SetReporter(nullptr);
  }

 private:
  TimeSliceResets& resets_;
  const std::chrono::milliseconds period_;
  PeriodicGroup* const group_;
  std::unique_ptr<PeriodicWorker> worker_;
};

// The resets outlive the strategy that uses them: a base constructed first.
struct ResetsHolder {
  ResetsHolder(devices::GpuControl& control, const TimeSliceResetOptions& options) : resets(control, options) {}
  TimeSliceResets resets;
};

class TimeSlicingFeature final : private ResetsHolder, public SharingStrategyFeature {
 public:
  TimeSlicingFeature(const FeatureContext& c, DeviceSharedWithOthers shared_with_others)
      : ResetsHolder(c.control, c.options.resets),
        SharingStrategyFeature(std::make_unique<TimeSlicingStrategy>(resets, c.inventory,
                                                                     std::move(shared_with_others)),
                               &TimeSlicingPieceCodec()),
        period_(c.options.reset_retry_period),
        group_(c.options.background) {}

  void DecoratePublished(std::vector<model::PublishedDevice>& devices) const override {
    devices = resets.Decorate(std::move(devices));
  }
  std::unique_ptr<devices::DeviceHealthSource> NewHealthSource() override {
    return std::make_unique<OwedResetRetry>(resets, period_, group_);
  }
  Status RunOwedWork() override { return resets.RetryOwed(); }

 private:
  const std::chrono::milliseconds period_;
  PeriodicGroup* const group_;
};

}  // namespace

std::unique_ptr<ClaimFeature> NewTimeSlicingFeature(const FeatureContext& context,
                                                    DeviceSharedWithOthers shared_with_others) {
  return std::make_unique<TimeSlicingFeature>(context, std::move(shared_with_others));
}

}  // namespace nvdra::gpu
