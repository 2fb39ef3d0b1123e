// The node label the upstream ComputeDomain controller schedules IMEX daemons
// by: resource.nvidia.com/computeDomain=<domain UID> on every node with a
// channel claim of that domain. The label is shared node state, so it is
// reference counted by claim UID: it is set by the first channel Prepare of a
// domain and removed when the last channel claim of that domain is
// unprepared, and only if it still names that domain. A label that names a
// different domain refuses the Prepare with upstream's words.
//
// A channel claim holds the label from its first Prepare attempt: the label
// is what brings the IMEX daemon to this node, so it must stay while the
// kubelet retries a Prepare that waits for that daemon. A holder that never
// completes (its claim went away before it was prepared) expires after
// `pending_ttl` without a new attempt.
//
// Unprepare never fails because the API server is unreachable: a removal
// that could not be written is retried by Repair, which the reconciler runs.
// Repair also puts back a label someone removed while a claim holds it. On a
// node that holds no channel claim, Repair reads the Node only until it has
// seen the label absent (or removed it); without the Node watch (closed
// while the node is idle) it then costs no API call until the next write.
//
// Two plugin processes share one ledger during a rolling update, and a claim
// prepared through one is unknown to the other's holders. With
// SetSharedHolders, label ownership follows the shared ledger: neither
// Release nor Repair removes a label that a live channel claim in the ledger
// holds, whichever process prepared it, and Repair puts it back for them. A
// claim whose Unprepare has begun (UnprepareStarted) is no holder: the last
// of several channel claims unprepared together removes the label.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "kube/kube_client.h"
#include "kube/watch_cache.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::computedomain {

inline constexpr const char* kComputeDomainLabel = "resource.nvidia.com/computeDomain";
// Upstream's message; users and its tests grep for it.
inline constexpr const char* kLabelForOtherDomain = "label already exists for a different ComputeDomain";

// The channel claims of the shared ledger (entries that still hold their
// devices): by domain, and those rebuilt without a domain (any label may be
// theirs).
struct LabelHolders {
  std::map<std::string, std::set<std::string>> by_domain;
  std::set<std::string> unknown_domain;
};

class NodeLabelManager {
 public:
  using SharedHolders = std::function<Result<LabelHolders>()>;

  // `node` is an optional watch of this Node (field selector on its name):
  // with it, a label that is already right costs no API call and a missing
  // one costs one write.
  NodeLabelManager(kube::KubeClient& client, std::string node_name, const kube::WatchCache* node = nullptr,
                   std::chrono::seconds pending_ttl = std::chrono::minutes(10),
                   const Clock& clock = SystemClock::Get());

  // A channel Prepare attempt of `claim_uid` in `domain_uid` (a pending
  // holder until Confirm). kConflict (retryable) with kLabelForOtherDomain
  // when this node is labelled for, or serves, another domain.
  Status Acquire(const std::string& domain_uid, const std::string& claim_uid);
  // The claim's Prepare completed: it holds the label until Release.
  void Confirm(const std::string& domain_uid, const std::string& claim_uid);
  // Unprepare of the claim: drops it; the last claim of the domain removes
  // the label. Errors are remembered for Repair, not returned.
  void Release(const std::string& domain_uid, const std::string& claim_uid);
  // Records a claim prepared before this process started (from the ledger),
  // without an API call.
  void Adopt(const std::string& domain_uid, const std::string& claim_uid);
  // A channel claim from before this process started whose domain the
  // ledger does not know (rebuilt from its CDI spec): while one is held,
  // Repair removes no label, since it may be that claim's. Released by
  // Forget (its Unprepare).
  void AdoptUnknownDomain(const std::string& claim_uid);
  void Forget(const std::string& claim_uid);
  // Where the holders of every process on this node are read before a label
  // is removed (the shared ledger). Unset: this process's holders alone.
  // Call before the manager is used.
  void SetSharedHolders(SharedHolders shared);

  // Makes the Node's label match the held claims: sets it when a held
  // domain's label is gone, removes one that names a domain no claim holds.
  // Returns what it could not fix.
  Status Repair();

  // Domains with at least one holder.
  std::set<std::string> HeldDomains();
  uint64_t api_requests() const;

 private:
  Status SetLabel(const std::string& domain_uid);
  Status RemoveLabel(const std::string& domain_uid);
  const nlohmann::json* CachedNode(kube::WatchCache::ObjectPtr& keep) const;
  void DropExpiredLocked() REQUIRES(mu_);
  // Whether a channel claim other than `except` holds a label for
  // `domain_uid` in the shared ledger ("" for any domain); errors when the
  // ledger cannot be read, so nothing is removed then.
  Result<bool> SharedHolderOf(const std::string& domain_uid, const std::string& except) const;

  struct Holder {
    bool confirmed = false;
    std::chrono::steady_clock::time_point last_attempt;
  };

  kube::KubeClient& client_;
  const std::string node_name_;
  const kube::WatchCache* node_;
  const std::chrono::seconds pending_ttl_;
  const Clock& clock_;
  // Serialises label writes of this process: a Release racing an Acquire of
  // the same domain must not remove a label the Acquire just relied on.
  // Held only for a short API write, never while waiting for readiness.
  mutable Mutex write_mu_;
  mutable Mutex mu_;
  std::map<std::string, std::map<std::string, Holder>> holders_ GUARDED_BY(mu_);  // domain -> claim -> holder
  uint64_t api_requests_ GUARDED_BY(mu_) = 0;
  std::set<std::string> unknown_domain_holders_ GUARDED_BY(mu_);
  // The label was last seen absent, or removed, and not written since.
  bool label_absent_ GUARDED_BY(mu_) = false;
  // The Node's resourceVersion after this process's last label write (or
  // the read it decided on): a watched copy older than that is not used.
  std::string known_rv_ GUARDED_BY(mu_);
  SharedHolders shared_;
};

}  // namespace nvdra::computedomain
