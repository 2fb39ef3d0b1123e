// A local, watch-fed copy of one collection of Kubernetes objects (what
// client-go calls an informer): one LIST, then one WATCH from the list's
// resourceVersion that is resumed after a dropped connection or a server-side
// timeout, advanced by BOOKMARK events, and replaced by a fresh LIST only
// when the server says the resourceVersion is too old (410 Gone). Readers
// look objects up in memory, so a lookup costs no API call. Memory is the
// objects themselves (optionally cut down by a projection) plus two indexes,
// so it grows with the number of objects and nothing else.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/kube_client.h"
#include "kube/watch_line_reader.h"
#include "util/cancel_flag.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::kube {

// A change counter several caches can share, so one waiter wakes on a change
// in any of them (e.g. a ComputeDomain or one of its cliques).
class ChangeNotifier {
 public:
  uint64_t version() const;
  void Bump();
  // Waits until version() differs from `seen` or `deadline` passes; returns
  // the version then.
  uint64_t WaitForChange(uint64_t seen, std::chrono::steady_clock::time_point deadline) const;

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  uint64_t version_ GUARDED_BY(mu_) = 0;
};

struct WatchCacheOptions {
  // The collection, e.g. "/apis/resource.nvidia.com/v1beta1/computedomains"
  // or "/apis/.../namespaces/<ns>/computedomaincliques".
  std::string path;
  std::string field_selector;
  std::string label_selector;
  std::string what = "objects";  // for logs: "ComputeDomains"
  // The kind every object must be ("Node"); an object that says it is of
  // another kind is rejected. "": any kind. Objects without a name or UID,
  // of another name than a metadata.name field selector asks for, or whose
  // UID changes under a MODIFIED or DELETED event are rejected too.
  std::string kind;
  // Server-side timeoutSeconds of each watch request, at least this and
  // under twice this, drawn at random per request (client-go's reflector:
  // 5 to 10 minutes); the watch is then resumed from the last
  // resourceVersion (no LIST).
  std::chrono::seconds watch_timeout{300};
  // A longer event line ends the watch with an error (then a resume).
  size_t max_event_bytes = kMaxWatchEventBytes;
  // Between failed LISTs, broken watches, and watches that ended (or were
  // answered 410 Gone) sooner than min_healthy_watch after they started:
  // doubling from initial_backoff up to max_backoff, plus up to half of it
  // again at random.
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{15'000};
  std::chrono::milliseconds min_healthy_watch{1'000};
  // Keeps only what readers need of an object (metadata.namespace, name,
  // uid and resourceVersion are always kept). Null: the whole object.
  std::function<nlohmann::json(const nlohmann::json&)> project;
  // Bumped after every applied change and on each (re)sync. Optional.
  std::shared_ptr<ChangeNotifier> notifier;
  // Told of every change on the cache's thread, after it is applied: each
  // ADDED, MODIFIED or DELETED event of an object of this collection, with
  // the object as the server sent it, and each (re)LIST, as type "LIST" with
  // a null object (a relist may stand for changes no event told of).
  // Optional; it must not stop the cache.
  std::function<void(const std::string& type, const nlohmann::json& object)> on_change;
};

struct WatchCacheStats {
  uint64_t lists = 0;               // LIST requests (1 + relists)
  uint64_t relists_after_gone = 0;  // LISTs caused by 410 Gone
  uint64_t watches = 0;             // WATCH requests started
  uint64_t resumes = 0;             // watches resumed after a drop or an end
  uint64_t events = 0;              // ADDED/MODIFIED/DELETED applied
  uint64_t bookmarks = 0;
  uint64_t rejected = 0;         // objects not of this collection, ignored
  std::string resource_version;  // where the next watch resumes
  size_t objects = 0;
};

class WatchCache {
 public:
  using ObjectPtr = std::shared_ptr<const nlohmann::json>;
  // The fuzz target of watch streams (watch_event_fuzz.cc) feeds lines
  // through ApplyLine and checks the maps against each other.
  friend class WatchCacheFuzzPeer;

  WatchCache(KubeClient& client, WatchCacheOptions options);
  ~WatchCache();
  WatchCache(const WatchCache&) = delete;
  WatchCache& operator=(const WatchCache&) = delete;

  // Starts the list-and-watch thread: a LIST, then watches.
  void Start();
  // Ends the thread (an open watch is cancelled within about a second) and
  // empties the cache: it reads as not synced until a later Start has
  // listed again.
  void Stop();

  // Blocks until the first LIST has been applied or `deadline` passes.
  bool WaitSynced(std::chrono::steady_clock::time_point deadline) const;
  bool synced() const;
  // The last LIST or WATCH failure (OK when the last attempt worked).
  Status last_error() const;

  // Lookups: null when absent. `ns` is "" for cluster-scoped objects.
  ObjectPtr Get(const std::string& ns, const std::string& name) const;
  ObjectPtr GetByUid(const std::string& uid) const;
  std::vector<ObjectPtr> List() const;
  // The notifier this cache bumps (the one from the options, or its own).
  ChangeNotifier& notifier() const { return *notifier_; }

  WatchCacheStats stats() const;

 private:
  enum class WatchEnd { kEnded, kGone, kBroken, kStopped };

  void Run();
  Status ListOnce();
  WatchEnd WatchOnce();
  // Applies one line of a watch stream; sets *gone on an ERROR 410.
  Status ApplyLine(const std::string& line, bool* gone);
  // Why `object` (of a `type` event) does not belong in this cache; "" when
  // it does.
  std::string Foreign(const nlohmann::json& object, const std::string& type) const;
  // The object as readers get it: the projection, and its identity.
  ObjectPtr Keep(const nlohmann::json& object) const;
  void Upsert(const nlohmann::json& object);
  void Erase(const nlohmann::json& object);
  std::string WithSelectors(std::string path, char sep) const;
  void SleepInterruptible(std::chrono::milliseconds d);
  // Sleeps `*backoff` plus jitter, then doubles it (up to max_backoff).
  void BackOff(std::chrono::milliseconds* backoff);
  void SetError(Status s);

  KubeClient& client_;
  WatchCacheOptions options_;
  std::shared_ptr<ChangeNotifier> notifier_;

  mutable Mutex mu_;
  mutable CondVar cv_;                                         // synced_ and stop_ changes
  std::map<std::string, ObjectPtr> objects_ GUARDED_BY(mu_);   // "<ns>/<name>"
  std::map<std::string, std::string> by_uid_ GUARDED_BY(mu_);  // uid -> key
  bool synced_ GUARDED_BY(mu_) = false;
  Status last_error_ GUARDED_BY(mu_);
  WatchCacheStats stats_ GUARDED_BY(mu_);

  std::mt19937_64 rng_{std::random_device{}()};  // the Run thread's alone
  CancelFlag stop_;
  std::thread thread_;
};

}  // namespace nvdra::kube
