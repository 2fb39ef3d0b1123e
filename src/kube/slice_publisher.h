// Keeps this node's ResourceSlices for one driver equal to the device
// inventory: one pool named after the node, owned by the Node object.
// Every sync lists the slices from the API server and repairs the
// difference, so slices deleted or changed by someone else (the kubelet
// wipes a node's slices when it restarts) come back within one period;
// nothing is trusted to a write-through cache.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kube/event_recorder.h"
#include "kube/kube_client.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::kube {

struct SlicePublisherOptions {
  std::chrono::milliseconds resync_period{30'000};
  std::chrono::milliseconds retry_period{5'000};  // after a failed sync
  // The Node's UID when the caller knows it; looked up once otherwise.
  std::string node_uid;
  // Where to report failures retrying cannot fix (forbidden, invalid), as a
  // Warning Event on the Node. Optional.
  EventRecorder* events = nullptr;
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
  void Update(std::vector<model::PublishedDevice> devices);

  // One reconciliation pass: list, then delete obsolete, update changed,
  // create missing slices.
  Status SyncOnce();

  // A background loop: syncs after Update/TriggerSync, every resync period,
  // and retry_period after a failure.
  void Start();
  void Stop();
  void TriggerSync();

  // Waits until at least `count` syncs have completed (see stats().syncs).
  bool WaitForSyncs(uint64_t count, std::chrono::milliseconds timeout);

  SlicePublisherStats stats() const;

 private:
  void Loop();
  Result<std::string> NodeUid();

  KubeClient& client_;
  const std::string driver_;
  const std::string node_;
  const SlicePublisherOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::vector<model::PublishedDevice>> devices_;  // nullopt: discovery not done
  uint64_t inventory_version_ = 0;
  std::string node_uid_;
  bool trigger_ = false;
  bool stop_ = false;
  SlicePublisherStats stats_;
  std::mutex sync_mu_;  // one SyncOnce at a time
  std::thread thread_;
};

}  // namespace nvdra::kube
