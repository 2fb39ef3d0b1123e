// Whether the node's ResourceSlices are published, for the plugin's
// readiness answer: a plugin whose devices the scheduler cannot see serves
// no new claim, however well its sockets answer. Told about every slice
// sync; keeps nvdra_slice_sync_total and nvdra_resource_slices_published,
// and says at Error, at most once a minute while it lasts, why the slices
// are not published.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "kube/slice_publisher.h"
#include "metrics/dra_metrics.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::plugin {

class SliceReadiness final : public kube::SlicePublisherObserver {
 public:
  // The Error line about slices that are not published repeats at most this often.
  static constexpr std::chrono::minutes kLogInterval{1};

  SliceReadiness(std::string driver, metrics::DraMetrics* metrics, const Clock& clock = SystemClock::Get());

  void OnSliceSync(const kube::SliceSyncResult& result) override EXCLUDES(mu_);

  // Ok once a sync published the slices and none failed since; Unavailable
  // with the reason otherwise.
  Status Ready() const EXCLUDES(mu_);

 private:
  void OnFailure(const Status& status) REQUIRES(mu_);

  const std::string driver_;
  metrics::DraMetrics* const metrics_;  // optional
  const Clock& clock_;
  mutable Mutex mu_;
  bool published_ GUARDED_BY(mu_) = false;
  // Why the last sync failed; "" before any failed, and after one published.
  std::string failure_ GUARDED_BY(mu_);
  // Failed syncs since the slices were last published (or since the start).
  uint64_t failures_ GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point failing_since_ GUARDED_BY(mu_);
  std::optional<std::chrono::steady_clock::time_point> last_logged_ GUARDED_BY(mu_);
};

}  // namespace nvdra::plugin
