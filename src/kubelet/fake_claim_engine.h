// A scripted ClaimEngine for tests and for the nvdra-fake-plugin binary:
// per-claim devices, errors, exceptions, delays, and latches that hold a claim
// until the test releases it, so tests can assert on completion order without
// timing. Lives in the test-support library nvdra_kubelet_testing, never in
// the plugins.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kubelet/claim_engine.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::kubelet {

struct FakeClaimBehavior {
  std::vector<PreparedDevice> devices;
  std::string prepare_error;
  std::string unprepare_error;
  // When set, the engine call throws std::runtime_error with this message
  // (after any delay or hold), as a bug deep in an engine would.
  std::string throw_message;
  std::chrono::milliseconds delay{0};  // interrupted by CancelAll()
  bool hold = false;                   // wait for Release(uid) (or CancelAll())
};

class FakeClaimEngine final : public ClaimEngine {
 public:
  // Used for claims without their own behaviour.
  void SetDefault(FakeClaimBehavior b) EXCLUDES(mu_);
  void Set(const std::string& uid, FakeClaimBehavior b) EXCLUDES(mu_);
  // Loads {"default": B, "claims": {"<uid>": B}} where B is
  // {"devices": [{"request_names": [..], "pool": "", "device": "",
  //   "cdi_device_ids": [..], "share_id": ""}], "prepare_error": "",
  //  "unprepare_error": "", "throw": "", "delay_ms": 0, "hold": false}.
  Status LoadScript(const std::string& json_text) EXCLUDES(mu_);

  // Called (under no lock of ours) when an engine call starts: op is
  // "prepare" or "unprepare". Lets a test process announce progress.
  void SetOnStart(std::function<void(const std::string& op, const ClaimRef& claim)> f);

  void Release(const std::string& uid) EXCLUDES(mu_);
  // Ends every delay and hold now (for shutdown).
  void CancelAll() EXCLUDES(mu_);
  // Blocks until an engine call for `uid` has started (or `timeout`).
  bool WaitStarted(const std::string& uid, std::chrono::milliseconds timeout) EXCLUDES(mu_);

  // Blocks until at least `n` engine calls have returned or thrown (or
  // `timeout`).
  bool WaitCompleted(size_t n, std::chrono::milliseconds timeout) EXCLUDES(mu_);
  // "prepare:<uid>" / "unprepare:<uid>" in the order calls returned.
  std::vector<std::string> Completed() const EXCLUDES(mu_);
  int Calls(const std::string& uid) const EXCLUDES(mu_);
  // Claims prepared and not unprepared since.
  std::set<std::string> Prepared() const EXCLUDES(mu_);

  // A scripted error is an Internal Status with the script's text.
  PrepareOutcome PrepareClaim(const ClaimRef& claim, std::chrono::steady_clock::time_point deadline) override
      EXCLUDES(mu_);
  Status UnprepareClaim(const ClaimRef& claim, std::chrono::steady_clock::time_point deadline) override EXCLUDES(mu_);

 private:
  FakeClaimBehavior BehaviorFor(const std::string& uid) const REQUIRES(mu_);
  // Applies delay and hold; false when cancelled.
  bool Pause(const std::string& uid, const FakeClaimBehavior& b) REQUIRES(mu_);

  std::function<void(const std::string&, const ClaimRef&)> on_start_;  // set before use
  mutable Mutex mu_;
  CondVar cv_;
  FakeClaimBehavior default_ GUARDED_BY(mu_);
  std::map<std::string, FakeClaimBehavior> behaviors_ GUARDED_BY(mu_);
  std::set<std::string> released_ GUARDED_BY(mu_);
  std::set<std::string> started_ GUARDED_BY(mu_);
  std::map<std::string, int> calls_ GUARDED_BY(mu_);
  std::vector<std::string> completed_ GUARDED_BY(mu_);
  std::set<std::string> prepared_ GUARDED_BY(mu_);
  bool cancelled_ GUARDED_BY(mu_) = false;
};

}  // namespace nvdra::kubelet
