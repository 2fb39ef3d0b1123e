// A scripted ClaimEngine for tests and for the nvdra-fake-plugin binary:
// per-claim devices, errors, delays, and latches that hold a claim until the
// test releases it, so tests can assert on completion order without timing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kubelet/claim_engine.h"
#include "util/status.h"

namespace nvdra::kubelet {

struct FakeClaimBehavior {
  std::vector<PreparedDevice> devices;
  std::string prepare_error;
  std::string unprepare_error;
  std::chrono::milliseconds delay{0};  // interrupted by CancelAll()
  bool hold = false;                   // wait for Release(uid) (or CancelAll())
};

class FakeClaimEngine final : public ClaimEngine {
 public:
  // Used for claims without their own behaviour.
  void SetDefault(FakeClaimBehavior b);
  void Set(const std::string& uid, FakeClaimBehavior b);
  // Loads {"default": B, "claims": {"<uid>": B}} where B is
  // {"devices": [{"request_names": [..], "pool": "", "device": "",
  //   "cdi_device_ids": [..], "share_id": ""}], "prepare_error": "",
  //  "unprepare_error": "", "delay_ms": 0, "hold": false}.
  Status LoadScript(const std::string& json_text);

  // Called (under no lock of ours) when an engine call starts: op is
  // "prepare" or "unprepare". Lets a test process announce progress.
  void SetOnStart(std::function<void(const std::string& op, const ClaimRef& claim)> f);

  void Release(const std::string& uid);
  // Ends every delay and hold now (for shutdown).
  void CancelAll();
  // Blocks until an engine call for `uid` has started (or `timeout`).
  bool WaitStarted(const std::string& uid, std::chrono::milliseconds timeout);

  // Blocks until at least `n` engine calls have returned (or `timeout`).
  bool WaitCompleted(size_t n, std::chrono::milliseconds timeout);
  // "prepare:<uid>" / "unprepare:<uid>" in the order calls returned.
  std::vector<std::string> Completed() const;
  int Calls(const std::string& uid) const;
  // Claims prepared and not unprepared since.
  std::set<std::string> Prepared() const;

  PrepareResult PrepareClaim(const ClaimRef& claim,
                             std::chrono::steady_clock::time_point deadline) override;
  std::string UnprepareClaim(const ClaimRef& claim,
                             std::chrono::steady_clock::time_point deadline) override;

 private:
  FakeClaimBehavior BehaviorFor(const std::string& uid) const;
  // Applies delay and hold; false when cancelled.
  bool Pause(const std::string& uid, const FakeClaimBehavior& b, std::unique_lock<std::mutex>& lock);

  std::function<void(const std::string&, const ClaimRef&)> on_start_;  // set before use
  mutable std::mutex mu_;
  std::condition_variable cv_;
  FakeClaimBehavior default_;
  std::map<std::string, FakeClaimBehavior> behaviors_;
  std::set<std::string> released_;
  std::set<std::string> started_;
  std::map<std::string, int> calls_;
  std::vector<std::string> completed_;
  std::set<std::string> prepared_;
  bool cancelled_ = false;
};

}  // namespace nvdra::kubelet
