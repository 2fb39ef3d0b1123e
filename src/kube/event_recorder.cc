#include "kube/event_recorder.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace nvdra::kube {

using nlohmann::json;

namespace {

std::string Rfc3339(Clock::time_point t, bool micro) {
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(t);
  std::time_t tt = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!micro) return std::string(buf) + "Z";
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - secs).count();
  return fmt::format("{}.{:06d}Z", buf, us);
}

}  // namespace

EventRecorder::EventRecorder(KubeClient& client, EventRecorderOptions options, const Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock), limiter_(options_.qps, options_.burst, clock) {}

uint64_t EventRecorder::posted() const {
  MutexLock l(mu_);
  return posted_;
}

uint64_t EventRecorder::suppressed() const {
  MutexLock l(mu_);
  return suppressed_;
}

Status EventRecorder::Record(const ObjectReference& obj, const std::string& type, const std::string& reason,
                             const std::string& message) {
  std::string key = obj.kind + "/" + obj.namespace_name + "/" + obj.name + "/" + obj.uid + "/" + reason + "/" + message;
  auto now = clock_.SteadyNow();
  {
    MutexLock l(mu_);
    auto it = last_.find(key);
    if (it != last_.end() && now - it->second < options_.dedup_window) {
      ++suppressed_;
      return Unavailable("event " + reason + " for " + obj.kind + " " + obj.name + " suppressed: posted recently");
    }
    if (!limiter_.TryAcquire()) {
      ++suppressed_;
      return Unavailable("event " + reason + " for " + obj.kind + " " + obj.name + " suppressed: event rate limit");
    }
    last_[key] = now;
    // Forget old keys so the map stays bounded by the window's traffic.
    for (auto i = last_.begin(); i != last_.end();) {
      i = now - i->second >= options_.dedup_window ? last_.erase(i) : std::next(i);
    }
  }
  // Events of cluster-scoped objects (Node) go to "default", as the kubelet does.
  std::string ns = obj.namespace_name.empty() ? "default" : obj.namespace_name;
  auto wall = clock_.Now();
  std::string stamp = Rfc3339(wall, false);
  int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(wall.time_since_epoch()).count();
  {
    // Names are "<object>.<hex nanoseconds>" like the kubelet's; kept strictly
    // increasing so two events in the same tick do not collide.
    MutexLock l(mu_);
    nanos = std::max(nanos, last_nanos_ + 1);
    last_nanos_ = nanos;
  }
  json involved = {{"kind", obj.kind}, {"name", obj.name}, {"apiVersion", obj.api_version}};
  if (!obj.namespace_name.empty()) involved["namespace"] = obj.namespace_name;
  if (!obj.uid.empty()) involved["uid"] = obj.uid;
  json ev = {{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", fmt::format("{}.{:x}", obj.name, nanos)}, {"namespace", ns}}},
             {"involvedObject", involved},
             {"reason", reason},
             {"message", message},
             {"type", type},
             {"source", {{"component", options_.component}, {"host", options_.instance}}},
             {"firstTimestamp", stamp},
             {"lastTimestamp", stamp},
             {"count", 1},
             {"reportingComponent", options_.component},
             {"reportingInstance", options_.instance}};
  auto r = client_.CreateJson("/api/v1/namespaces/" + ns + "/events", ev);
  if (!r.ok()) return r.status().Wrap("post event " + reason + " for " + obj.kind + " " + obj.name);
  MutexLock l(mu_);
  ++posted_;
  return Status::Ok();
}

}  // namespace nvdra::kube
