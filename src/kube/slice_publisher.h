// Keeps this node's ResourceSlices for one driver equal to the device
// inventory: one pool named after the node, owned by the Node object.
// Every sync lists the slices from the API server and repairs the
// difference, so slices deleted or changed by someone else (the kubelet
// wipes a node's slices when it restarts) come back within one period;
// nothing is trusted to a write-through cache.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kube/event_recorder.h"
#include "kube/kube_client.h"
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
  std::chrono::milliseconds resync_period{30'000};
  std::chrono::milliseconds retry_period{5'000};  // after a failed sync
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
};

struct SlicePublisherStats {
  uint64_t syncs = 0;         // completed SyncOnce calls, successful or not
  uint64_t failed_syncs = 0;
  uint64_t creates = 0;
  uint64_t updates = 0;
  uint64_t deletes = 0;
  int64_t generation = 0;     // pool generation of the last successful sync
  size_t slices = 0;          // slices in the pool after the last successful sync
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

  SlicePublisherStats stats() const EXCLUDES(mu_);

 private:
  // Brings the pool in line with `devices`, counting its writes in `result`.
  Status Publish(std::vector<model::PublishedDevice> devices, SliceSyncResult& result)
      REQUIRES(sync_mu_) EXCLUDES(mu_);
  Result<std::string> NodeUid() EXCLUDES(mu_);
  // Adds a finished sync to the stats and tells the observer.
  void Record(const SliceSyncResult& result) EXCLUDES(mu_);
  // Logs a failed sync, and posts a Node event when retrying cannot fix it.
  void ReportFailure(const Status& s) EXCLUDES(mu_);

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
  // The failure last logged as a warning; "" after a sync that succeeded.
  std::string reported_failure_ GUARDED_BY(mu_);
  // Last: it stops before the members its syncs use go away.
  PeriodicWorker worker_;
};

}  // namespace nvdra::kube
