// Times one step of a claim's prepare (or a whole request) and records it in
// DraMetrics when the scope ends, so every exit path, early error returns
// included, is measured. Time comes from an injected Clock so tests can
// advance it instead of sleeping.
#pragma once

#include <chrono>
#include <functional>

#include "metrics/dra_metrics.h"
#include "util/clock.h"

namespace nvdra::metrics {

class StepTimer {
 public:
  // Records `step` into `metrics` on destruction (or Stop).
  StepTimer(DraMetrics& metrics, PrepareStep step, const Clock& clock)
      : clock_(clock),
        start_(clock.SteadyNow()),
        record_([&metrics, step](double s) { metrics.ObservePrepareStep(step, s); }) {}
  // Records the request duration for `op`; `ok` is read at the end so the
  // caller can set it on the success path only.
  StepTimer(DraMetrics& metrics, Operation op, const bool& ok, const Clock& clock)
      : clock_(clock),
        start_(clock.SteadyNow()),
        record_([&metrics, op, &ok](double s) { metrics.Observe(op, s, ok); }) {}
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;
  ~StepTimer() { Stop(); }

  // Records now; later calls and the destructor do nothing. Returns seconds.
  double Stop() {
    if (!record_) return elapsed_;
    elapsed_ = Elapsed();
    auto record = std::move(record_);
    record_ = nullptr;
    record(elapsed_);
    return elapsed_;
  }
  double Elapsed() const { return std::chrono::duration<double>(clock_.SteadyNow() - start_).count(); }

 private:
  const Clock& clock_;
  std::chrono::steady_clock::time_point start_;
  std::function<void(double)> record_;
  double elapsed_ = 0;
};

}  // namespace nvdra::metrics
