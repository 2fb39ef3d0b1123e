#include "cmd/plugin_common/slice_readiness.h"

#include <utility>

#include "util/log.h"

namespace nvdra::plugin {

namespace {

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

SliceReadiness::SliceReadiness(std::string driver, metrics::DraMetrics* metrics, const Clock& clock)
    : driver_(std::move(driver)), metrics_(metrics), clock_(clock) {
  if (metrics_ != nullptr) metrics_->SetSlicesPublished(false);
}

void SliceReadiness::OnSliceSync(const kube::SliceSyncResult& result) {
  if (metrics_ != nullptr) metrics_->RecordSliceSync(result.status.ok() ? "success" : "error");
  MutexLock l(mu_);
  if (!result.status.ok()) {
    OnFailure(result.status);
    return;
  }
  // A sync before hardware discovery publishes nothing: not yet ready.
  if (!result.published || published_) return;
  published_ = true;
  if (metrics_ != nullptr) metrics_->SetSlicesPublished(true);
  if (failures_ > 0) {
    NVDRA_INFO("ResourceSlices of driver {} published after {} failed sync(s) in {:.1f} s; readiness answers "
               "SERVING again unless something else is missing",
               driver_, failures_, Seconds(clock_.SteadyNow() - failing_since_));
  }
  failure_.clear();
  failures_ = 0;
  last_logged_.reset();
}

void SliceReadiness::OnFailure(const Status& status) {
  const auto now = clock_.SteadyNow();
  if (published_ || failures_ == 0) failing_since_ = now;
  published_ = false;
  if (metrics_ != nullptr) metrics_->SetSlicesPublished(false);
  failure_ = status.message();
  ++failures_;
  // Each sync's failure is logged by the publisher; this line says what it
  // means for the node, once a minute, so it stands out at -v 0 too.
  if (last_logged_ && now - *last_logged_ < kLogInterval) return;
  last_logged_ = now;
  NVDRA_ERROR("ResourceSlices of driver {} are not published ({} failed sync(s) in {:.0f} s; retrying): the "
              "scheduler cannot allocate this node's devices, and readiness answers NOT_SERVING: {}",
              driver_, failures_, Seconds(now - failing_since_), failure_);
}

Status SliceReadiness::Ready() const {
  MutexLock l(mu_);
  if (published_) return Status::Ok();
  if (failure_.empty()) return Unavailable("ResourceSlices of driver " + driver_ + " not yet published");
  return Unavailable("ResourceSlices of driver " + driver_ + " not published: " + failure_);
}

}  // namespace nvdra::plugin
