// Keeps this node's ResourceSlices for one driver equal to the device
// inventory: one pool named after the node, owned by the Node object.
// Every sync lists the slices from the API server and repairs the
// difference; nothing is trusted to a write-through cache. Syncs run after
// an inventory change, every resync period, and, with a watch of the node's
// slices, whenever a slice changes in a way the last sync did not write:
// deleted, edited or added by someone else (the kubelet wipes a node's
// slices when it restarts). The watch only says when to sync, never what
// the pool holds, so a late or lost event costs a later repair, never a
// wrong write.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kube/event_recorder.h"
#include "kube/kube_client.h"
#include "kube/watch_cache.h"
#include "model/published_device.h"
#include "util/mutex.h"
#include "util/periodic_worker.h"
#include "util/status.h"

namespace nvdra::kube {

// The outcome of one sync.
struct SliceSyncResult {
  Status status;
  // False before hardware discovery: nothing was asked of the API server.
  bool published = false;
  uint64_t creates = 0;
  uint64_t updates = 0;
  uint64_t deletes = 0;
  int64_t generation = 0;  // the pool's generation, when the sync succeeded
  size_t slices = 0;       // slices in the pool, when the sync succeeded
};

// Told about every sync (metrics, for one), on the thread that ran it, with
// none of the publisher's locks held. Must not call back into the publisher's
// SyncOnce.
class SlicePublisherObserver {
 public:
  virtual ~SlicePublisherObserver() = default;
  virtual void OnSliceSync(const SliceSyncResult& result) = 0;
};

struct SlicePublisherOptions {
  // A sync at least this often, whatever the watch says (with a watch, a
  // backstop that can be long: the plugins use 30 minutes).
  std::chrono::milliseconds resync_period{30'000};
  // After a failed sync. A sync after a failed one starts with one GET of
  // /version without the client's retries (SlicePublisher::ServerAnswers):
  // during an outage each sync fails at once, and the pool is written about
  // a retry period after the API server answers again.
  std::chrono::milliseconds retry_period{1'000};
  // The Node's UID when the caller knows it; looked up once otherwise.
  std::string node_uid;
  // Where to report failures retrying cannot fix (forbidden, invalid), as a
  // Warning Event on the Node. Optional.
  EventRecorder* events = nullptr;
  // Told about every sync. Optional; must outlive the publisher.
  SlicePublisherObserver* observer = nullptr;
  // Run on this group's thread instead of one of its own. Optional; must
  // outlive the publisher.
  PeriodicGroup* group = nullptr;
  // Watch the node's slices of the driver (a WatchCache with the sync's
  // field selector, holding only their metadata) and sync on a change the
  // last sync did not write, and after each relist.
  bool watch = false;
  // The watch's server-side timeout, at least this and under twice this.
  std::chrono::seconds watch_timeout{300};
};

struct SlicePublisherStats {
  uint64_t syncs = 0;  // completed SyncOnce calls, successful or not
  uint64_t failed_syncs = 0;
  uint64_t creates = 0;
  uint64_t updates = 0;
  uint64_t deletes = 0;
  int64_t generation = 0;  // pool generation of the last successful sync
  size_t slices = 0;       // slices in the pool after the last successful sync
  uint64_t syncs_started = 0;
  uint64_t watch_events = 0;    // changes of the node's slices seen on the watch
  uint64_t watch_triggers = 0;  // syncs the watch asked for (relists included)
  // syncs_started when the watch last asked for a sync: it is served once
  // syncs passes this (syncs run one at a time).
  uint64_t watch_trigger_after = 0;
  Status last_error;
};

class SlicePublisher {
 public:
  SlicePublisher(KubeClient& client, std::string driver, std::string node, SlicePublisherOptions options = {});
  ~SlicePublisher();
  SlicePublisher(const SlicePublisher&) = delete;
  SlicePublisher& operator=(const SlicePublisher&) = delete;

  // Sets the inventory and asks the loop to sync. The first call also marks
  // hardware discovery as done: until then nothing is published, not even an
  // empty pool.
  void Update(std::vector<model::PublishedDevice> devices) EXCLUDES(mu_);

  // One reconciliation pass: list, then delete obsolete, update changed,
  // create missing slices.
  Status SyncOnce() EXCLUDES(sync_mu_, mu_);

  // A background loop: syncs after Update/TriggerSync, every resync period,
  // and retry_period after a failure.
  void Start();
  void Stop();
  void TriggerSync();

  // Waits until the background loop completed at least `count` syncs.
  bool WaitForSyncs(uint64_t count, std::chrono::milliseconds timeout);
  // Waits until `done` holds for the stats (checked after each sync and
  // each watched change).
  bool WaitForStats(const std::function<bool(const SlicePublisherStats&)>& done, std::chrono::milliseconds timeout)
      EXCLUDES(mu_);

  SlicePublisherStats stats() const EXCLUDES(mu_);

 private:
  // Brings the pool in line with `devices`, counting its writes in `result`.
  Status Publish(std::vector<model::PublishedDevice> devices, SliceSyncResult& result) REQUIRES(sync_mu_) EXCLUDES(mu_);
  Result<std::string> NodeUid() EXCLUDES(mu_);
  // Until a sync has published, and after one failed: whether the API server
  // answers now (one request, no retries), so that a sync during an outage
  // fails at once instead of waiting out the client's backoff.
  Status ServerAnswers() EXCLUDES(mu_);
  // Adds a finished sync to the stats and tells the observer.
  void Record(const SliceSyncResult& result) EXCLUDES(mu_);
  // Logs a failed sync, and posts a Node event when retrying cannot fix it.
  void ReportFailure(const Status& s) EXCLUDES(mu_);
  // Starts (or, for another API version, restarts) the watch of the slices.
  void WatchSlices(const std::string& version) REQUIRES(sync_mu_) EXCLUDES(mu_);
  // A change the watch saw; asks for a sync unless the last sync wrote it.
  void OnWatched(const std::string& type, const nlohmann::json& object) EXCLUDES(mu_);
  // Whether a watched change leaves the pool as the last sync wrote it.
  bool AsWritten(const std::string& type, const nlohmann::json& object) const REQUIRES(mu_);

  KubeClient& client_;
  const std::string driver_;
  const std::string node_;
  const SlicePublisherOptions options_;

  Mutex sync_mu_ ACQUIRED_BEFORE(mu_);  // one SyncOnce at a time
  mutable Mutex mu_;
  // nullopt: discovery not done
  std::optional<std::vector<model::PublishedDevice>> devices_ GUARDED_BY(mu_);
  std::string node_uid_ GUARDED_BY(mu_);
  SlicePublisherStats stats_ GUARDED_BY(mu_);
  // The last sync published (false before the first one did, and after one
  // failed).
  bool published_ GUARDED_BY(mu_) = false;
  // The failure last logged as a warning; "" after a sync that succeeded.
  std::string reported_failure_ GUARDED_BY(mu_);
  // What the last sync made the pool say, to judge watched changes by: its
  // generation, per slice index the spec (as compared) and the slice's name
  // ("" while its create is under way).
  int64_t written_generation_ GUARDED_BY(mu_) = 0;
  std::vector<nlohmann::json> written_specs_ GUARDED_BY(mu_);
  std::vector<std::string> written_names_ GUARDED_BY(mu_);
  mutable CondVar stats_cv_;  // stats_ changes
  std::unique_ptr<WatchCache> watch_ GUARDED_BY(sync_mu_);
  std::string watch_version_ GUARDED_BY(sync_mu_);
  // Last: it stops before the members its syncs use go away.
  PeriodicWorker worker_;
};

}  // namespace nvdra::kube
