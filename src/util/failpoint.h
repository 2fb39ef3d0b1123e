// Named fault-injection points. Production code marks the instants where a
// crash or an error matters (before/after each durable write, after a device
// step) with NVDRA_FAILPOINT("name"); tests and end-to-end scripts arm them
// through the environment, e.g.
//   NVDRA_FAILPOINTS="ledger-after-started-write=crash;cdi-before-write=error"
// Actions:
//   crash      SIGKILL to ourselves: no destructors, no flush (same as kill -9)
//   error      the point returns an Internal error ("failpoint <name> fired")
//   delay(MS)  sleeps MS milliseconds, then continues
//   pass       nothing: the point is armed and counted (a point that runs
//              differently while armed, such as ledger-mid-append, takes
//              its armed path)
//   off        disarms the point
// An optional "*N" suffix fires the action only on the N-th hit (1-based),
// e.g. "ledger-after-started-write=crash*3".
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <string_view>

#include "util/mutex.h"
#include "util/status.h"

namespace nvdra {

class FailPoints {
 public:
  enum class Kind { kOff, kCrash, kError, kDelay, kPass };
  struct Action {
    Kind kind = Kind::kOff;
    int delay_ms = 0;
    int on_hit = 0;  // 0: every hit
  };

  // The process-wide registry; armed from NVDRA_FAILPOINTS on first use.
  static FailPoints& Process();

  // Parses a spec like the environment variable's value and arms each point.
  Status Load(std::string_view spec) EXCLUDES(mu_);
  void Set(const std::string& name, Action action) EXCLUDES(mu_);
  void Clear() EXCLUDES(mu_);

  // Called at a fault point. OK unless the point is armed with "error".
  Status Hit(std::string_view name) EXCLUDES(mu_);

  // Whether `name` is armed; without any armed point, one atomic load. For a
  // point that changes how the code around it runs (a record written in two
  // halves), so that the unarmed path does the plain thing.
  bool Armed(std::string_view name) const EXCLUDES(mu_);

  // Number of times a point was reached (armed or not) since the last Clear.
  int HitCount(std::string_view name) const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::atomic<bool> any_armed_{false};
  std::map<std::string, Action, std::less<>> actions_ GUARDED_BY(mu_);
  std::map<std::string, int, std::less<>> hits_ GUARDED_BY(mu_);
};

}  // namespace nvdra

#define NVDRA_FAILPOINT(name) ::nvdra::FailPoints::Process().Hit(name)
