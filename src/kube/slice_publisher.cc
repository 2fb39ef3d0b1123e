#include "kube/slice_publisher.h"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "kube/slice_builder.h"
#include "util/json_reader.h"
#include "util/log.h"

namespace nvdra::kube {

using nlohmann::json;

namespace {

// Slice names are "<5 hex digits of the index>-<driver>-<node>-<random>", so
// a slice's place in the pool survives a restart of the plugin.
std::string GenerateName(size_t index, const std::string& driver, const std::string& node) {
  return fmt::format("{:05x}-{}-{}-", index, driver, node);
}

std::optional<size_t> IndexFromName(const std::string& name, const std::string& driver, const std::string& node) {
  std::string suffix = "-" + driver + "-" + node + "-";
  if (name.size() < 6 + suffix.size() - 1 || name.compare(5, suffix.size(), suffix) != 0) return std::nullopt;
  size_t index = 0;
  for (size_t i = 0; i < 5; ++i) {
    char c = name[i];
    int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (v < 0) return std::nullopt;
    index = index * 16 + static_cast<size_t>(v);
  }
  return index;
}

// The part of an existing spec we own, with fields the server fills in
// (taint timeAdded) removed, to compare against the desired spec. Best
// effort by design: whatever shape the server sent, anything odd just
// compares unequal (and the slice is rewritten).
json Comparable(const json& spec) {
  JsonReader r(spec);
  const json* pool = r.Find("pool");
  const json* devices = r.Find("devices");
  json out = {{"driver", r.ValueOr<std::string>("driver", "")},
              {"nodeName", r.ValueOr<std::string>("nodeName", "")},
              {"pool", pool != nullptr && pool->is_object() ? *pool : json::object()},
              {"devices", devices != nullptr && devices->is_array() ? *devices : json::array()}};
  for (auto& d : out["devices"]) {
    if (!d.is_object()) continue;
    auto basic = d.find("basic");
    json& fields = basic != d.end() && basic->is_object() ? *basic : d;
    auto taints = fields.find("taints");
    if (taints == fields.end() || !taints->is_array()) continue;
    for (auto& t : *taints) {
      if (t.is_object()) t.erase("timeAdded");
    }
  }
  return out;
}

// metadata.name of an object from the API server; "" when it has none or an
// odd shape (the reader reports, never throws).
std::string NameOf(const json& object) {
  auto name = JsonReader(object).Field("metadata").OptionalOr<std::string>("name", "");
  return name.ok() ? *name : "";
}

// The field selector of this node's slices of one driver, for the sync's
// LIST and for the watch.
std::string NodeSlicesSelector(const std::string& node, const std::string& driver) {
  return "spec.nodeName=" + node + ",spec.driver=" + driver;
}

struct Existing {
  std::string name, uid, resource_version;
  std::optional<size_t> index;  // set for slices of our pool only
  int64_t generation = 0;
  json spec;
};

// This node's slices of our driver as the API server has them, sorted by
// name, and the newest generation of our pool among them (0: none).
struct Listed {
  std::vector<Existing> slices;
  int64_t max_generation = 0;
};

// Checked: a list misread (a generation of the wrong type read as 0, a
// slice without its name) would make the sync delete or re-create the wrong
// slices, so a list of an unexpected shape fails the sync instead.
Result<Existing> ParseExisting(const JsonReader& item, const std::string& driver, const std::string& node) {
  Existing e;
  NVDRA_ASSIGN_OR_RETURN(auto meta, item.OptionalObject("metadata"));
  if (meta) {
    NVDRA_ASSIGN_OR_RETURN(e.name, meta->OptionalOr<std::string>("name", ""));
    NVDRA_ASSIGN_OR_RETURN(e.uid, meta->OptionalOr<std::string>("uid", ""));
    NVDRA_ASSIGN_OR_RETURN(e.resource_version, meta->OptionalOr<std::string>("resourceVersion", ""));
  }
  NVDRA_ASSIGN_OR_RETURN(auto spec, item.OptionalObject("spec"));
  if (!spec) return e;
  e.spec = spec->value();
  NVDRA_ASSIGN_OR_RETURN(auto pool, spec->OptionalObject("pool"));
  if (!pool) return e;
  NVDRA_ASSIGN_OR_RETURN(std::string pool_name, pool->OptionalOr<std::string>("name", ""));
  // Only our pool is indexed; any other pool of ours on this node is obsolete.
  if (pool_name == node) {
    e.index = IndexFromName(e.name, driver, node);
    NVDRA_ASSIGN_OR_RETURN(e.generation, pool->OptionalOr<int64_t>("generation", 0));
  }
  return e;
}

Result<Listed> ParseListed(const json& list, const std::string& driver, const std::string& node) {
  Listed out;
  NVDRA_RETURN_IF_ERROR(JsonReader(list).ForEach("items", [&](const JsonReader& item) -> Status {
    NVDRA_ASSIGN_OR_RETURN(Existing e, ParseExisting(item, driver, node));
    out.max_generation = std::max(out.max_generation, e.generation);  // 0 outside our pool
    out.slices.push_back(std::move(e));
    return Status::Ok();
  }));
  std::sort(out.slices.begin(), out.slices.end(), [](const Existing& a, const Existing& b) { return a.name < b.name; });
  return out;
}

// The pool we want: the spec of each slice index at a given generation.
class DesiredPool {
 public:
  DesiredPool(const std::string& driver, const std::string& node, const std::string& version,
              std::vector<model::PublishedDevice> devices, bool counters_in_own_slice)
      : driver_(driver),
        node_(node),
        version_(version),
        chunks_(ChunkSlices(std::move(devices), counters_in_own_slice)) {
    // An empty inventory is still a pool: one slice without devices tells
    // the scheduler the node has nothing, rather than "not published yet".
    if (chunks_.empty()) chunks_.emplace_back();
  }
  size_t size() const { return chunks_.size(); }
  json Spec(size_t index, int64_t generation) const {
    return BuildSliceSpec(driver_, node_, PoolRef{node_, generation, static_cast<int64_t>(chunks_.size())},
                          chunks_[index], version_);
  }
  // Whether `e` already says what index `i` should say at `generation`.
  bool Matches(const Existing& e, size_t i, int64_t generation) const {
    return Comparable(e.spec) == Comparable(Spec(i, generation));
  }

 private:
  std::string driver_, node_, version_;
  std::vector<SliceContent> chunks_;
};

// The content changed when a slice of the newest generation disagrees with
// what we want at its index (or lies beyond the pool's end): the pool then
// gets the next generation. Only missing slices (deleted by someone else) do
// not need one.
int64_t ChooseGeneration(const Listed& listed, const DesiredPool& desired) {
  const int64_t newest = listed.max_generation;
  bool changed = newest == 0;
  for (const auto& e : listed.slices) {
    if (!e.index || e.generation != newest) continue;
    if (*e.index >= desired.size() || !desired.Matches(e, *e.index, newest)) changed = true;
  }
  return changed ? newest + 1 : newest;
}

// What one sync writes: per index the slice to keep (already right, else the
// first of that index, to update) or none (to create); the rest is obsolete.
struct Plan {
  int64_t generation = 0;
  std::vector<const Existing*> keep;
  std::vector<bool> keep_ok;
  std::vector<const Existing*> obsolete;
};

Plan MakePlan(const Listed& listed, const DesiredPool& desired) {
  Plan plan;
  plan.generation = ChooseGeneration(listed, desired);
  plan.keep.assign(desired.size(), nullptr);
  plan.keep_ok.assign(desired.size(), false);
  for (const auto& e : listed.slices) {
    if (!e.index || *e.index >= desired.size()) continue;
    size_t i = *e.index;
    bool ok = desired.Matches(e, i, plan.generation);
    if (plan.keep[i] == nullptr || (ok && !plan.keep_ok[i])) {
      plan.keep[i] = &e;
      plan.keep_ok[i] = ok;
    }
  }
  for (const auto& e : listed.slices) {
    bool kept = e.index && *e.index < desired.size() && plan.keep[*e.index] == &e;
    if (!kept) plan.obsolete.push_back(&e);
  }
  return plan;
}

// Where one sync writes: the collection's path in the served API version,
// and the Node that owns every slice.
struct Target {
  KubeClient& client;
  std::string version;
  std::string base;  // .../resourceslices
  std::string node;
  std::string driver;
  json owner;
  // Told the name of each slice created, with its index.
  std::function<void(size_t index, const std::string& name)> created;
};

json SliceObject(const Target& t, json metadata, json spec) {
  metadata["ownerReferences"] = t.owner;
  return {{"apiVersion", "resource.k8s.io/" + t.version},
          {"kind", "ResourceSlice"},
          {"metadata", std::move(metadata)},
          {"spec", std::move(spec)}};
}

Status DeleteObsolete(const Target& t, const Plan& plan, SliceSyncResult& result) {
  for (const Existing* e : plan.obsolete) {
    Status s = t.client.Delete(t.base + "/" + e->name, e->uid, e->resource_version);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s.Wrap("delete obsolete ResourceSlice " + e->name);
    ++result.deletes;
  }
  return Status::Ok();
}

Status WriteSlices(const Target& t, const Plan& plan, const DesiredPool& desired, SliceSyncResult& result) {
  for (size_t i = 0; i < desired.size(); ++i) {
    if (plan.keep[i] != nullptr && plan.keep_ok[i]) continue;
    json spec = desired.Spec(i, plan.generation);
    if (const Existing* e = plan.keep[i]; e != nullptr) {
      json obj = SliceObject(t, {{"name", e->name}, {"resourceVersion", e->resource_version}}, std::move(spec));
      auto r = t.client.UpdateJson(t.base + "/" + e->name, obj);
      if (!r.ok()) return r.status().Wrap("update ResourceSlice " + e->name);
      ++result.updates;
    } else {
      json obj = SliceObject(t, {{"generateName", GenerateName(i, t.driver, t.node)}}, std::move(spec));
      auto r = t.client.CreateJson(t.base, obj);
      if (!r.ok()) return r.status().Wrap("create ResourceSlice " + std::to_string(i) + " of pool " + t.node);
      ++result.creates;
      if (t.created) t.created(i, NameOf(*r));
    }
  }
  return Status::Ok();
}

}  // namespace

SlicePublisher::SlicePublisher(KubeClient& client, std::string driver, std::string node, SlicePublisherOptions options)
    : client_(client),
      driver_(std::move(driver)),
      node_(std::move(node)),
      options_(std::move(options)),
      node_uid_(options_.node_uid),
      worker_({.period = options_.resync_period,
               .retry_period = options_.retry_period,
               .name = "the ResourceSlice sync",
               .thread_name = "slice-sync",
               .group = options_.group},
              [this] { return SyncOnce(); }) {}

SlicePublisher::~SlicePublisher() { Stop(); }

void SlicePublisher::Update(std::vector<model::PublishedDevice> devices) {
  {
    MutexLock l(mu_);
    devices_ = std::move(devices);
  }
  worker_.Trigger();
}

void SlicePublisher::TriggerSync() { worker_.Trigger(); }

void SlicePublisher::Start() { worker_.Start(); }

void SlicePublisher::Stop() {
  worker_.Stop();
  MutexLock l(sync_mu_);
  if (watch_) watch_->Stop();
  watch_.reset();
  watch_version_.clear();
}

SlicePublisherStats SlicePublisher::stats() const {
  MutexLock l(mu_);
  return stats_;
}

bool SlicePublisher::WaitForSyncs(uint64_t count, std::chrono::milliseconds timeout) {
  return worker_.WaitForRuns(count, timeout);
}

bool SlicePublisher::WaitForStats(const std::function<bool(const SlicePublisherStats&)>& done,
                                  std::chrono::milliseconds timeout) {
  MutexLock l(mu_);
  return stats_cv_.WaitFor(mu_, timeout, [&]() REQUIRES(mu_) { return done(stats_); });
}

void SlicePublisher::WatchSlices(const std::string& version) {
  if (watch_ && watch_version_ == version) return;
  if (watch_) watch_->Stop();
  WatchCacheOptions o;
  o.path = "/apis/resource.k8s.io/" + version + "/resourceslices";
  o.field_selector = NodeSlicesSelector(node_, driver_);
  o.what = "ResourceSlices of driver " + driver_;
  o.kind = "ResourceSlice";
  o.watch_timeout = options_.watch_timeout;
  // Events are judged from the object they carry; the cache needs only the
  // identity it keeps anyway.
  o.project = [](const json&) { return json::object(); };
  o.on_change = [this](const std::string& type, const json& object) { OnWatched(type, object); };
  watch_ = std::make_unique<WatchCache>(client_, std::move(o));
  watch_version_ = version;
  watch_->Start();
}

void SlicePublisher::OnWatched(const std::string& type, const json& object) {
  bool sync = false;
  {
    MutexLock l(mu_);
    if (type == "LIST") {
      sync = true;
    } else {
      ++stats_.watch_events;
      sync = !AsWritten(type, object);
    }
    if (sync) {
      ++stats_.watch_triggers;
      stats_.watch_trigger_after = stats_.syncs_started;
    }
  }
  stats_cv_.NotifyAll();
  if (sync) {
    NVDRA_VLOG(4, "ResourceSlices of driver {}: {} {} changes the pool; syncing", driver_, type, NameOf(object));
    worker_.Trigger();
  }
}

bool SlicePublisher::AsWritten(const std::string& type, const json& object) const {
  auto e = ParseExisting(JsonReader(object), driver_, node_);
  if (!e.ok()) return false;
  const auto named = std::find(written_names_.begin(), written_names_.end(), e->name);
  // A deleted slice matters when the pool keeps it; the sync's own deletes
  // are of slices it does not keep.
  if (type == "DELETED") return named == written_names_.end();
  // A slice of another pool, generation or index, of other content, or a
  // second slice for an index: the pool is not as written.
  if (!e->index || *e->index >= written_specs_.size() || e->generation != written_generation_) return false;
  const std::string& name = written_names_[*e->index];
  if (!name.empty() && name != e->name) return false;
  return Comparable(e->spec) == written_specs_[*e->index];
}

Result<std::string> SlicePublisher::NodeUid() {
  {
    MutexLock l(mu_);
    if (!node_uid_.empty()) return node_uid_;
  }
  NVDRA_ASSIGN_OR_RETURN(json node, client_.GetNode(node_));
  auto read_uid = JsonReader(node).Field("metadata").OptionalOr<std::string>("uid", "");
  if (!read_uid.ok()) return read_uid.status().Wrap("Node " + node_);
  std::string uid = *read_uid;
  if (uid.empty()) return Internal("Node " + node_ + " has no metadata.uid");
  MutexLock l(mu_);
  node_uid_ = uid;
  return uid;
}

Status SlicePublisher::SyncOnce() {
  MutexLock sync_lock(sync_mu_);
  std::optional<std::vector<model::PublishedDevice>> devices;
  {
    MutexLock l(mu_);
    devices = devices_;
    ++stats_.syncs_started;
  }
  SliceSyncResult result;
  result.published = devices.has_value();
  // Before discovery nothing is published.
  if (devices) result.status = Publish(std::move(*devices), result);
  Record(result);
  if (!result.status.ok()) ReportFailure(result.status);
  return result.status;
}

Status SlicePublisher::ServerAnswers() {
  {
    MutexLock l(mu_);
    if (published_) return Status::Ok();
  }
  auto r = client_.GetOnce("/version");
  if (!r.ok()) return Unavailable("the API server does not answer: " + r.status().message());
  // 429 and 5xx: up but not serving (starting, overloaded, its storage
  // gone); anything else is an answer, and the sync's own requests say more.
  if (r->status == 429 || r->status >= 500) {
    return StatusFromResponse("GET", "/version", *r).Wrap("the API server is not serving requests");
  }
  return Status::Ok();
}

Status SlicePublisher::Publish(std::vector<model::PublishedDevice> devices, SliceSyncResult& result) {
  NVDRA_RETURN_IF_ERROR(ServerAnswers());
  NVDRA_ASSIGN_OR_RETURN(std::string version, client_.ResourceApiVersion());
  NVDRA_ASSIGN_OR_RETURN(std::string node_uid, NodeUid());
  Target target{
      client_,
      version,
      "/apis/resource.k8s.io/" + version + "/resourceslices",
      node_,
      driver_,
      json::array({{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_}, {"uid", node_uid}, {"controller", true}}}),
      [this](size_t index, const std::string& name) {
        MutexLock l(mu_);
        if (index < written_names_.size()) written_names_[index] = name;
      }};
  if (options_.watch) WatchSlices(version);

  auto list = client_.ListJson(target.base, "", NodeSlicesSelector(node_, driver_));
  if (!list.ok()) {
    // The served version may have changed under us: ask again next time.
    if (list.status().code() == StatusCode::kNotFound) client_.ForgetResourceApiVersion();
    return list.status().Wrap("list ResourceSlices of node " + node_);
  }
  auto parsed = ParseListed(*list, driver_, node_);
  if (!parsed.ok()) return parsed.status().Wrap("list ResourceSlices of node " + node_);
  const Listed listed = std::move(parsed).value();
  // Partitionable devices: where the counter sets go depends on the API
  // server's version.
  bool own_slice = false;
  if (std::any_of(devices.begin(), devices.end(), [](const auto& d) { return !d.consumes_counters.empty(); })) {
    auto v = client_.GetJson("/version");
    if (!v.ok()) return v.status().Wrap("read the API server's version");
    own_slice = CounterSetsInOwnSlice(v->value("gitVersion", ""));
  }
  const DesiredPool desired(driver_, node_, version, std::move(devices), own_slice);
  const Plan plan = MakePlan(listed, desired);
  {
    MutexLock l(mu_);
    written_generation_ = plan.generation;
    written_specs_.clear();
    written_names_.clear();
    for (size_t i = 0; i < desired.size(); ++i) {
      written_specs_.push_back(Comparable(desired.Spec(i, plan.generation)));
      written_names_.push_back(plan.keep[i] != nullptr ? plan.keep[i]->name : "");
    }
  }

  NVDRA_RETURN_IF_ERROR(DeleteObsolete(target, plan, result));
  NVDRA_RETURN_IF_ERROR(WriteSlices(target, plan, desired, result));
  result.generation = plan.generation;
  result.slices = desired.size();
  return Status::Ok();
}

void SlicePublisher::Record(const SliceSyncResult& result) {
  {
    MutexLock l(mu_);
    ++stats_.syncs;
    stats_.creates += result.creates;
    stats_.updates += result.updates;
    stats_.deletes += result.deletes;
    published_ = result.status.ok() ? (published_ || result.published) : false;
    if (result.status.ok()) {
      if (result.published) {
        stats_.generation = result.generation;
        stats_.slices = result.slices;
      }
      stats_.last_error = Status::Ok();
      reported_failure_.clear();
    } else {
      ++stats_.failed_syncs;
      stats_.last_error = result.status;
    }
  }
  stats_cv_.NotifyAll();
  if (options_.observer != nullptr) options_.observer->OnSliceSync(result);
}

void SlicePublisher::ReportFailure(const Status& s) {
  // A warning when a sync starts failing or fails differently; the same
  // failure again (every retry, a retry period apart) only at -v 4.
  bool repeated = false;
  {
    MutexLock l(mu_);
    repeated = reported_failure_ == s.ToString();
    reported_failure_ = s.ToString();
  }
  if (repeated) {
    NVDRA_VLOG(4, "ResourceSlice sync for driver {} failed again: {}", driver_, s.ToString());
  } else {
    NVDRA_WARN("ResourceSlice sync for driver {} failed: {}", driver_, s.ToString());
  }
  bool permanent = s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kInvalidArgument;
  if (!permanent || options_.events == nullptr) return;
  std::string uid;
  {
    MutexLock l(mu_);
    uid = node_uid_;
  }
  // Best effort: the recorder rate-limits, and a failed post changes nothing here.
  (void)options_.events->Record({"v1", "Node", "", node_, uid}, "Warning", "ResourceSlicePublishFailed",
                                "publishing ResourceSlices of driver " + driver_ + " failed: " + s.message());
}

}  // namespace nvdra::kube
