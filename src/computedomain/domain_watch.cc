#include "computedomain/domain_watch.h"

#include <algorithm>

#include "util/json_reader.h"
#include "util/log.h"

namespace nvdra::computedomain {

using nlohmann::json;
using Steady = std::chrono::steady_clock;

namespace {

// Best-effort reads through the one reader of external JSON: a
// half-written or odd-shaped object reads as "not ready", never as an
// exception inside a kubelet call.
const json* Member(const json& j, const char* key) { return JsonReader(j).Find(key); }

std::string Str(const json& j, const char* key) { return JsonReader(j).ValueOr<std::string>(key, ""); }

std::string MetadataStr(const json& object, const char* key) {
  const json* metadata = Member(object, "metadata");
  return metadata != nullptr ? Str(*metadata, key) : "";
}

// Keeps the entries of `list` whose `key` names `node`.
json OnlyNode(const json* list, const char* key, const std::string& node) {
  json out = json::array();
  if (list == nullptr || !list->is_array()) return out;
  for (const auto& e : *list) {
    if (Str(e, key) == node) out.push_back(e);
  }
  return out;
}

constexpr const char* kGroupVersion = "/apis/resource.nvidia.com/v1beta1";

}  // namespace

DomainWatch::DomainWatch(kube::KubeClient& client, DomainWatchOptions options)
    : client_(client),
      options_(std::move(options)),
      notifier_(std::make_shared<kube::ChangeNotifier>()),
      clique_id_(options_.clique_id) {
  const std::string node = options_.node_name;
  // Every watch of the plugin retries and resumes alike.
  auto watch_of = [this](std::string path, std::string what, std::string kind) {
    kube::WatchCacheOptions o;
    o.path = std::move(path);
    o.what = std::move(what);
    o.kind = std::move(kind);
    o.watch_timeout = options_.watch_timeout;
    o.initial_backoff = options_.initial_backoff;
    o.max_backoff = options_.max_backoff;
    return o;
  };
  kube::WatchCacheOptions d = watch_of(std::string(kGroupVersion) + "/computedomains", "ComputeDomains",
                                       "ComputeDomain");
  d.notifier = notifier_;
  d.project = [node](const json& cd) {
    const json* status = Member(cd, "status");
    json s = json::object();
    if (status != nullptr && status->is_object()) {
      s["status"] = Str(*status, "status");
      s["nodes"] = OnlyNode(Member(*status, "nodes"), "name", node);
    }
    return json{{"status", s}};
  };
  domains_ = std::make_unique<kube::WatchCache>(client, std::move(d));
  if (options_.cliques) {
    kube::WatchCacheOptions c = watch_of(std::string(kGroupVersion) + "/namespaces/" + options_.clique_namespace +
                                             "/computedomaincliques",
                                         "ComputeDomainCliques in namespace " + options_.clique_namespace,
                                         "ComputeDomainClique");
    c.notifier = notifier_;
    c.project = [node](const json& clique) {
      return json{{"daemons", OnlyNode(Member(clique, "daemons"), "nodeName", node)}};
    };
    cliques_ = std::make_unique<kube::WatchCache>(client, std::move(c));
  }
  if (options_.watch_node) {
    kube::WatchCacheOptions n = watch_of("/api/v1/nodes", "Node " + node, "Node");
    n.field_selector = "metadata.name=" + node;
    node_ = std::make_unique<kube::WatchCache>(client, std::move(n));
  }
}

DomainWatch::~DomainWatch() { Stop(); }

void DomainWatch::Stop() {
  MutexLock l(active_mu_);
  stopped_ = true;
  active_ = false;
  if (node_) node_->Stop();
  if (cliques_) cliques_->Stop();
  domains_->Stop();
}

bool DomainWatch::Activate() {
  MutexLock l(active_mu_);
  if (stopped_) return false;
  last_use_ = Steady::now();
  if (active_) return true;
  active_ = true;
  ++activations_;
  NVDRA_INFO("opening the ComputeDomain watches{} (this node has ComputeDomain work)",
             node_ ? " and the watch of Node " + options_.node_name : "");
  domains_->Start();
  if (cliques_) cliques_->Start();
  if (node_) node_->Start();
  return true;
}

bool DomainWatch::ActivateAndWait(Steady::time_point deadline) {
  if (!Activate()) return false;
  return domains_->WaitSynced(deadline) && (!node_ || node_->WaitSynced(deadline));
}

bool DomainWatch::DeactivateIfIdle(Steady::duration linger) {
  MutexLock l(active_mu_);
  if (!active_ || Steady::now() - last_use_ < linger) return false;
  active_ = false;
  NVDRA_INFO("closing the ComputeDomain watches: this node has had no ComputeDomain work for {} s",
             std::chrono::duration_cast<std::chrono::seconds>(linger).count());
  if (node_) node_->Stop();
  if (cliques_) cliques_->Stop();
  domains_->Stop();
  return true;
}

bool DomainWatch::active() const {
  MutexLock l(active_mu_);
  return active_;
}

uint64_t DomainWatch::activations() const {
  MutexLock l(active_mu_);
  return activations_;
}

bool DomainWatch::WaitSynced(Steady::time_point deadline) const {
  return domains_->WaitSynced(deadline) && (!cliques_ || cliques_->WaitSynced(deadline)) &&
         (!node_ || node_->WaitSynced(deadline));
}

Result<ComputeDomainInfo> DomainWatch::Get(const std::string& domain_uid) {
  ActivateAndWait(Steady::now() + options_.demand_sync_wait);
  return Lookup(domain_uid);
}

void DomainWatch::SetCliqueId(const std::string& clique_id) {
  {
    MutexLock l(mu_);
    clique_id_ = clique_id;
  }
  notifier_->Bump();  // waiters re-check against the new clique
}

std::string DomainWatch::clique_id() const {
  MutexLock l(mu_);
  return clique_id_;
}

std::optional<bool> DomainWatch::Exists(const std::string& domain_uid) const {
  if (!domains_->synced()) return std::nullopt;
  return domains_->GetByUid(domain_uid) != nullptr;
}

Result<ComputeDomainInfo> DomainWatch::Lookup(const std::string& domain_uid) const {
  if (!domains_->synced()) {
    Status e = domains_->last_error();
    return Unavailable("the ComputeDomain watch has not synced yet" + (e.ok() ? "" : " (" + e.message() + ")"));
  }
  auto cd = domains_->GetByUid(domain_uid);
  if (!cd) return NotFound("ComputeDomain not found: " + domain_uid);
  ComputeDomainInfo st;
  st.uid = domain_uid;
  st.ns = MetadataStr(*cd, "namespace");
  st.name = MetadataStr(*cd, "name");
  const std::string& node = options_.node_name;
  if (cliques_) {
    std::string name = domain_uid + "." + clique_id();
    std::string where = "ComputeDomainClique " + options_.clique_namespace + "/" + name;
    kube::WatchCache::ObjectPtr clique;
    if (cliques_->synced()) {
      clique = cliques_->Get(options_.clique_namespace, name);
    } else if (cliques_->last_error().code() == StatusCode::kPermissionDenied) {
      clique = GetCliqueDirectly(name);
    } else {
      Status e = cliques_->last_error();
      st.not_ready = "the ComputeDomainClique watch in namespace " + options_.clique_namespace + " has not synced yet" +
                     (e.ok() ? "" : " (" + e.message() + ")");
      return st;
    }
    if (!clique) {
      st.not_ready = where + " does not exist yet (no IMEX daemon of this clique has reported)";
      return st;
    }
    const json* daemons = Member(*clique, "daemons");
    if (daemons == nullptr || !daemons->is_array() || daemons->empty()) {
      st.not_ready = where + " lists no daemon for node " + node;
      return st;
    }
    std::string status = Str((*daemons)[0], "status");
    st.node_ready = status == "Ready";
    if (!st.node_ready)
      st.not_ready = "the daemon for node " + node + " in " + where + " is " + (status.empty() ? "NotReady" : status);
    return st;
  }
  std::string where = "ComputeDomain " + st.ns + "/" + st.name;
  const json* status = Member(*cd, "status");
  const json* nodes = status != nullptr ? Member(*status, "nodes") : nullptr;
  if (nodes == nullptr || !nodes->is_array() || nodes->empty()) {
    st.not_ready = where + " status.nodes does not list node " + node;
    return st;
  }
  std::string s = Str((*nodes)[0], "status");
  st.node_ready = s == "Ready";
  if (!st.node_ready)
    st.not_ready = "node " + node + " is " + (s.empty() ? "NotReady" : s) + " in " + where + " status.nodes";
  return st;
}

kube::WatchCache::ObjectPtr DomainWatch::GetCliqueDirectly(const std::string& name) const {
  auto got = client_.GetJson(std::string(kGroupVersion) + "/namespaces/" + options_.clique_namespace +
                             "/computedomaincliques/" + name);
  if (!got.ok()) return nullptr;
  const json* daemons = Member(*got, "daemons");
  return std::make_shared<const json>(json{{"daemons", OnlyNode(daemons, "nodeName", options_.node_name)}});
}

Result<ComputeDomainInfo> DomainWatch::WaitReady(const std::string& domain_uid, Steady::time_point deadline) {
  // A domain created moments ago may not have reached the watch yet; an
  // unknown UID is reported after this grace rather than waited on for the
  // whole deadline.
  ActivateAndWait(std::min(deadline, Steady::now() + options_.demand_sync_wait));
  const auto not_found_until = std::min(deadline, Steady::now() + std::chrono::seconds(2));
  auto recheck = std::chrono::milliseconds(100);
  for (;;) {
    uint64_t seen = notifier_->version();
    auto st = Lookup(domain_uid);
    if (st.ok() && st->node_ready) return st;
    auto now = Steady::now();
    if (!st.ok() && st.status().code() == StatusCode::kNotFound && now >= not_found_until) return st;
    if (now >= deadline) return st;
    notifier_->WaitForChange(seen, std::min(deadline, now + recheck));
    recheck = std::min<std::chrono::milliseconds>(recheck * 2, std::chrono::milliseconds(2000));
  }
}

}  // namespace nvdra::computedomain
