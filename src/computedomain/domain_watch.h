// What the ComputeDomain plugin knows about ComputeDomains and their cliques,
// kept current by watches instead of per-claim API calls: one LIST and WATCH
// of ComputeDomains (all namespaces) and one of ComputeDomainCliques in the
// driver namespace. Only this node's entries of status.nodes and of a
// clique's daemons are kept, so memory grows with the number of domains, not
// with their size. A claim's lookup and its readiness wait cost no API call.
//
// Readiness follows the upstream plugin: with the ComputeDomainCliques gate,
// the clique "<domain UID>.<clique id>" in the driver namespace lists a daemon
// for this node with status Ready; without it, the domain's status.nodes
// lists this node as Ready.
//
// Upstream's Role grants only `get` on cliques. Where listing them is
// forbidden, readiness falls back to a GET of the one clique per check (and
// the docs ask for list/watch).
//
// With `watch_node`, a watch of this node's Node object (for the
// ComputeDomain node label, NodeLabelManager) opens and closes with the
// others.
//
// The watches are open only while the node has ComputeDomain work: a node
// that runs no channel or daemon claim holds none of them (most nodes of a
// GPU cluster, most of the time). A lookup (Get, WaitReady) opens them and
// waits for the ComputeDomain list; DeactivateIfIdle, which the maintenance
// pass calls while the node holds no ComputeDomain claim, closes them once
// no lookup came for a while. Activate opens them at once.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "computedomain/compute_domain_source.h"
#include "kube/kube_client.h"
#include "kube/watch_cache.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::computedomain {

struct DomainWatchOptions {
  std::string node_name;
  // Where the ComputeDomainCliques live: --clique-namespace, else --namespace.
  std::string clique_namespace = "default";
  bool cliques = true;    // the ComputeDomainCliques gate
  std::string clique_id;  // "<clusterUUID>.<cliqueId>" or ""
  std::chrono::seconds watch_timeout{300};
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{15'000};
  bool watch_node = false;
  // How long a lookup that opened the watches waits for their first list.
  std::chrono::milliseconds demand_sync_wait{10'000};
};

class DomainWatch final : public ComputeDomainSource {
 public:
  DomainWatch(kube::KubeClient& client, DomainWatchOptions options);
  ~DomainWatch() override;

  // Closes the watches for good: lookups no longer open them.
  void Stop();
  bool WaitSynced(std::chrono::steady_clock::time_point deadline) const;

  // Opens the watches unless they are open (or stopped for good) and
  // counts as use: DeactivateIfIdle waits `linger` from here. False once
  // stopped for good.
  bool Activate();
  // Activate, then waits until the ComputeDomain and Node lists are in or
  // `deadline` passes; whether they are.
  bool ActivateAndWait(std::chrono::steady_clock::time_point deadline);
  // Closes the watches when they are open and unused for `linger`; whether
  // it closed them. The caches empty; the next lookup lists again.
  bool DeactivateIfIdle(std::chrono::steady_clock::duration linger);
  bool active() const;
  uint64_t activations() const;

  // kNotFound ("ComputeDomain not found: <uid>") when the synced cache has
  // no such domain; kUnavailable while the caches have not synced yet. Get
  // opens the watches first (and waits up to demand_sync_wait for them);
  // Lookup answers from the caches as they are.
  Result<ComputeDomainInfo> Get(const std::string& domain_uid) override;
  Result<ComputeDomainInfo> Lookup(const std::string& domain_uid) const;
  // Whether the domain exists (for the directory cleanup); nullopt while the
  // cache is not synced, so nothing is removed on a guess.
  std::optional<bool> Exists(const std::string& domain_uid) const;

  // Waits until this node is ready in the domain or `deadline` passes,
  // re-checking on every change the watches bring (and at least every
  // `max_backoff`-capped interval). Holds no lock while waiting. Returns the
  // last state; check node_ready.
  Result<ComputeDomainInfo> WaitReady(const std::string& domain_uid,
                                      std::chrono::steady_clock::time_point deadline) override;

  // The clique may change (fabric partitioning); readiness follows it.
  void SetCliqueId(const std::string& clique_id);
  std::string clique_id() const;

  const kube::WatchCache& domains() const { return *domains_; }
  const kube::WatchCache* cliques() const { return cliques_.get(); }
  // The Node watch (watch_node); null without one.
  const kube::WatchCache* node() const { return node_.get(); }

 private:
  // The clique by GET, while the clique watch is forbidden; null otherwise.
  kube::WatchCache::ObjectPtr GetCliqueDirectly(const std::string& name) const;

  kube::KubeClient& client_;
  DomainWatchOptions options_;
  std::shared_ptr<kube::ChangeNotifier> notifier_;
  std::unique_ptr<kube::WatchCache> domains_;
  std::unique_ptr<kube::WatchCache> cliques_;
  std::unique_ptr<kube::WatchCache> node_;
  mutable Mutex mu_;
  std::string clique_id_ GUARDED_BY(mu_);
  // Opening and closing the watches, one at a time.
  mutable Mutex active_mu_;
  bool active_ GUARDED_BY(active_mu_) = false;
  bool stopped_ GUARDED_BY(active_mu_) = false;
  std::chrono::steady_clock::time_point last_use_ GUARDED_BY(active_mu_);
  uint64_t activations_ GUARDED_BY(active_mu_) = 0;
};

}  // namespace nvdra::computedomain
