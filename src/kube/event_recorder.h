// Posts core/v1 Events for failures a cluster admin should see (on the
// ResourceClaim or the Node), rate-limited so a failure that repeats on
// every retry cannot flood the API server.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "kube/kube_client.h"
#include "kube/rate_limiter.h"
#include "util/clock.h"
#include "util/mutex.h"

namespace nvdra::kube {

struct ObjectReference {
  std::string api_version;     // "resource.k8s.io/v1", "v1"
  std::string kind;            // "ResourceClaim", "Node"
  std::string namespace_name;  // empty for cluster-scoped objects
  std::string name;
  std::string uid;
};

struct EventRecorderOptions {
  std::string component = "nvdra";  // reportingController / source.component
  std::string instance;             // reportingInstance / source.host: the node name
  // The same (object, reason, message) is posted at most once per window.
  std::chrono::seconds dedup_window{300};
  // All events together: a token bucket.
  double qps = 1.0 / 5;
  int burst = 25;
};

class EventRecorder {
 public:
  EventRecorder(KubeClient& client, EventRecorderOptions options, const Clock& clock);

  // type: "Warning" or "Normal". Returns kUnavailable without a request when
  // rate limited, so callers can log and move on.
  Status Record(const ObjectReference& object, const std::string& type, const std::string& reason,
                const std::string& message) EXCLUDES(mu_);

  uint64_t posted() const EXCLUDES(mu_);
  uint64_t suppressed() const EXCLUDES(mu_);

 private:
  KubeClient& client_;
  const EventRecorderOptions options_;
  const Clock& clock_;
  RateLimiter limiter_;
  mutable Mutex mu_;
  // key -> last post
  std::map<std::string, std::chrono::steady_clock::time_point> last_ GUARDED_BY(mu_);
  uint64_t posted_ GUARDED_BY(mu_) = 0;
  uint64_t suppressed_ GUARDED_BY(mu_) = 0;
  int64_t last_nanos_ GUARDED_BY(mu_) = 0;
};

}  // namespace nvdra::kube
