#include "computedomain/node_label_manager.h"

#include "kube/node_labels.h"
#include "util/log.h"

namespace nvdra::computedomain {

NodeLabelManager::NodeLabelManager(kube::KubeClient& client, std::string node_name, const kube::WatchCache* node,
                                   std::chrono::seconds pending_ttl, const Clock& clock)
    : client_(client), node_name_(std::move(node_name)), node_(node), pending_ttl_(pending_ttl), clock_(clock) {}

void NodeLabelManager::DropExpiredLocked() {
  auto now = clock_.SteadyNow();
  for (auto d = holders_.begin(); d != holders_.end();) {
    for (auto c = d->second.begin(); c != d->second.end();) {
      if (!c->second.confirmed && now - c->second.last_attempt > pending_ttl_) {
        NVDRA_INFO("claim {} never completed its Prepare in ComputeDomain {}; it no longer holds the node label",
                   c->first, d->first);
        c = d->second.erase(c);
      } else {
        ++c;
      }
    }
    d = d->second.empty() ? holders_.erase(d) : std::next(d);
  }
}

const nlohmann::json* NodeLabelManager::CachedNode(kube::WatchCache::ObjectPtr& keep) const {
  if (node_ == nullptr || !node_->synced()) return nullptr;
  keep = node_->Get("", node_name_);
  if (!keep) return nullptr;
  // The watch delivers this process's own label write a moment after the
  // write's answer: a copy older than the write would have a removal or a
  // set decide there is nothing to do while the Node says otherwise.
  MutexLock l(mu_);
  if (!known_rv_.empty() && !kube::ResourceVersionNotOlder(kube::ResourceVersionOf(*keep), known_rv_)) return nullptr;
  return keep.get();
}

Status NodeLabelManager::SetLabel(const std::string& domain_uid) {
  kube::WatchCache::ObjectPtr keep;
  const nlohmann::json* cached = CachedNode(keep);
  auto rule = [&](const std::optional<std::string>& cur) -> Result<std::optional<std::string>> {
    if (cur && !cur->empty() && *cur != domain_uid) {
      return Conflict(std::string(kLabelForOtherDomain) + " (node " + node_name_ + " has " + kComputeDomainLabel + "=" +
                      *cur + ", this claim's domain is " + domain_uid +
                      "; one node serves one ComputeDomain at a time)");
    }
    return std::optional<std::string>(domain_uid);
  };
  auto r = kube::UpdateNodeLabel(client_, node_name_, kComputeDomainLabel, rule, cached);
  MutexLock l(mu_);
  label_absent_ = false;
  if (r.ok()) {
    known_rv_ = kube::ResourceVersionOf(r->node);
    api_requests_ += r->requests;
    if (r->written) NVDRA_INFO("labelled node {} {}={}", node_name_, kComputeDomainLabel, domain_uid);
  }
  return r.status();
}

Status NodeLabelManager::RemoveLabel(const std::string& domain_uid) {
  kube::WatchCache::ObjectPtr keep;
  const nlohmann::json* cached = CachedNode(keep);
  auto rule = [&](const std::optional<std::string>& cur) -> Result<std::optional<std::string>> {
    if (cur && *cur == domain_uid) return std::optional<std::string>();
    return cur;  // absent, or another domain's: not ours to remove
  };
  auto r = kube::UpdateNodeLabel(client_, node_name_, kComputeDomainLabel, rule, cached);
  MutexLock l(mu_);
  label_absent_ = r.ok() && !kube::NodeLabel(r->node, kComputeDomainLabel).has_value();
  if (r.ok()) {
    known_rv_ = kube::ResourceVersionOf(r->node);
    api_requests_ += r->requests;
    if (r->written) NVDRA_INFO("removed label {}={} from node {}", kComputeDomainLabel, domain_uid, node_name_);
  }
  return r.status();
}

Status NodeLabelManager::Acquire(const std::string& domain_uid, const std::string& claim_uid) {
  MutexLock w(write_mu_);
  {
    // Another domain still held by a claim on this node: refuse without
    // asking the API server (the label names it, or will again on Repair).
    MutexLock l(mu_);
    DropExpiredLocked();
    for (const auto& [domain, claims] : holders_) {
      if (domain != domain_uid && !claims.empty()) {
        return Conflict(std::string(kLabelForOtherDomain) + " (node " + node_name_ + " serves ComputeDomain " + domain +
                        " for claim " + claims.begin()->first + "; this claim's domain is " + domain_uid + ")");
      }
    }
  }
  bool held;
  {
    MutexLock l(mu_);
    auto it = holders_.find(domain_uid);
    held = it != holders_.end() && !it->second.empty();
  }
  // Another claim of this domain already put the label there (Repair puts
  // it back if someone removed it): no API call.
  if (!held) NVDRA_RETURN_IF_ERROR(SetLabel(domain_uid).Wrap("error adding node label"));
  MutexLock l(mu_);
  Holder& h = holders_[domain_uid][claim_uid];
  h.last_attempt = clock_.SteadyNow();
  return Status::Ok();
}

void NodeLabelManager::Confirm(const std::string& domain_uid, const std::string& claim_uid) {
  MutexLock l(mu_);
  holders_[domain_uid][claim_uid].confirmed = true;
}

void NodeLabelManager::Adopt(const std::string& domain_uid, const std::string& claim_uid) {
  Confirm(domain_uid, claim_uid);
}

void NodeLabelManager::AdoptUnknownDomain(const std::string& claim_uid) {
  MutexLock l(mu_);
  unknown_domain_holders_.insert(claim_uid);
}

void NodeLabelManager::Forget(const std::string& claim_uid) {
  MutexLock l(mu_);
  unknown_domain_holders_.erase(claim_uid);
}

void NodeLabelManager::SetSharedHolders(SharedHolders shared) { shared_ = std::move(shared); }

Result<bool> NodeLabelManager::SharedHolderOf(const std::string& domain_uid, const std::string& except) const {
  if (!shared_) return false;
  NVDRA_ASSIGN_OR_RETURN(LabelHolders h, shared_());
  for (const auto& uid : h.unknown_domain) {
    if (uid != except) return true;
  }
  for (const auto& [domain, claims] : h.by_domain) {
    if (!domain_uid.empty() && domain != domain_uid) continue;
    for (const auto& uid : claims) {
      if (uid != except) return true;
    }
  }
  return false;
}

void NodeLabelManager::Release(const std::string& domain_uid, const std::string& claim_uid) {
  MutexLock w(write_mu_);
  {
    MutexLock l(mu_);
    auto it = holders_.find(domain_uid);
    if (it != holders_.end()) {
      it->second.erase(claim_uid);
      if (!it->second.empty()) return;  // another channel claim of the domain still runs here
      holders_.erase(it);
    }
  }
  // A claim of this domain prepared by another process on this node (a
  // rolling update) still needs the label.
  auto other = SharedHolderOf(domain_uid, claim_uid);
  if (other.ok() && *other) {
    NVDRA_VLOG(4, "claim {}: keeping node label {}={}: another channel claim in the ledger holds it", claim_uid,
               kComputeDomainLabel, domain_uid);
    return;
  }
  if (!other.ok()) {
    NVDRA_WARN("claim {}: not removing node label {}={} now: {}; the reconciler retries", claim_uid,
               kComputeDomainLabel, domain_uid, other.status().ToString());
    return;
  }
  Status s = RemoveLabel(domain_uid);
  if (!s.ok()) {
    NVDRA_WARN("claim {}: could not remove node label {}={} ({}); the reconciler retries", claim_uid,
               kComputeDomainLabel, domain_uid, s.ToString());
  }
}

std::set<std::string> NodeLabelManager::HeldDomains() {
  MutexLock l(mu_);
  DropExpiredLocked();
  std::set<std::string> out;
  for (const auto& [d, c] : holders_) {
    if (!c.empty()) out.insert(d);
  }
  return out;
}

uint64_t NodeLabelManager::api_requests() const {
  MutexLock l(mu_);
  return api_requests_;
}

Status NodeLabelManager::Repair() {
  MutexLock w(write_mu_);
  std::set<std::string> held = HeldDomains();
  std::optional<std::string> shared_unknown;
  if (shared_) {
    // The ledger is shared by every plugin process of this node: a claim
    // another instance prepared holds the label as much as one of ours.
    auto shared = shared_();
    if (!shared.ok()) return shared.status().Wrap("read the ledger's channel claims to repair the node label");
    for (const auto& [domain, claims] : shared->by_domain) {
      if (!claims.empty()) held.insert(domain);
    }
    if (!shared->unknown_domain.empty()) shared_unknown = *shared->unknown_domain.begin();
  }
  if (held.size() > 1) {
    std::string list;
    for (const auto& d : held) list += (list.empty() ? "" : ", ") + d;
    return FailedPrecondition("claims of several ComputeDomains (" + list + ") are prepared on node " + node_name_ +
                              "; the node label can name only one");
  }
  kube::WatchCache::ObjectPtr keep;
  const nlohmann::json* cached = CachedNode(keep);
  if (held.empty() && !shared_unknown && cached == nullptr) {
    // Nothing held, and the label was seen absent (or removed) since the
    // last write: no GET while the node is idle and its watch closed.
    MutexLock l(mu_);
    if (label_absent_ && unknown_domain_holders_.empty()) return Status::Ok();
  }
  std::optional<std::string> cur;
  if (cached != nullptr) {
    cur = kube::NodeLabel(*cached, kComputeDomainLabel);
  } else {
    auto node = client_.GetNode(node_name_);
    {
      MutexLock l(mu_);
      ++api_requests_;
    }
    if (!node.ok()) return node.status().Wrap("read node " + node_name_ + " to repair its ComputeDomain label");
    cur = kube::NodeLabel(*node, kComputeDomainLabel);
  }
  if (held.empty()) {
    if (!cur || cur->empty()) {
      MutexLock l(mu_);
      label_absent_ = true;
      return Status::Ok();
    }
    {
      MutexLock l(mu_);
      if (!shared_unknown && !unknown_domain_holders_.empty()) shared_unknown = *unknown_domain_holders_.begin();
    }
    if (shared_unknown) {
      NVDRA_VLOG(4, "node {}: keeping label {}={}: claim {} (rebuilt, its domain unknown) may hold it", node_name_,
                 kComputeDomainLabel, *cur, *shared_unknown);
      return Status::Ok();
    }
    NVDRA_INFO("node {} is labelled {}={} but no claim of that domain is prepared here; removing the label", node_name_,
               kComputeDomainLabel, *cur);
    return RemoveLabel(*cur);
  }
  const std::string& want = *held.begin();
  if (cur == want) return Status::Ok();
  NVDRA_WARN("node {}: label {} is {} while a claim of ComputeDomain {} is prepared; repairing", node_name_,
             kComputeDomainLabel, cur ? "\"" + *cur + "\"" : "missing", want);
  return SetLabel(want);
}

}  // namespace nvdra::computedomain
