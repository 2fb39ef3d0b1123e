#include "kube/slice_publisher.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "kube/slice_builder.h"
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
// (taint timeAdded) removed, to compare against the desired spec.
json Comparable(const json& spec) {
  json out = {{"driver", spec.value("driver", "")},
              {"nodeName", spec.value("nodeName", "")},
              {"pool", spec.value("pool", json::object())},
              {"devices", spec.value("devices", json::array())}};
  for (auto& d : out["devices"]) {
    json* fields = d.contains("basic") ? &d["basic"] : &d;
    if (fields->contains("taints")) {
      for (auto& t : (*fields)["taints"]) t.erase("timeAdded");
    }
  }
  return out;
}

struct Existing {
  std::string name, uid, resource_version;
  std::optional<size_t> index;
  int64_t generation = 0;
  json spec;
};

}  // namespace

SlicePublisher::SlicePublisher(KubeClient& client, std::string driver, std::string node,
                               SlicePublisherOptions options)
    : client_(client), driver_(std::move(driver)), node_(std::move(node)), options_(std::move(options)) {
  node_uid_ = options_.node_uid;
}

SlicePublisher::~SlicePublisher() { Stop(); }

void SlicePublisher::Update(std::vector<model::PublishedDevice> devices) {
  {
    std::lock_guard<std::mutex> l(mu_);
    devices_ = std::move(devices);
    ++inventory_version_;
    trigger_ = true;
  }
  cv_.notify_all();
}

void SlicePublisher::TriggerSync() {
  {
    std::lock_guard<std::mutex> l(mu_);
    trigger_ = true;
  }
  cv_.notify_all();
}

SlicePublisherStats SlicePublisher::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

bool SlicePublisher::WaitForSyncs(uint64_t count, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [&] { return stats_.syncs >= count; });
}

Result<std::string> SlicePublisher::NodeUid() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!node_uid_.empty()) return node_uid_;
  }
  NVDRA_ASSIGN_OR_RETURN(json node, client_.GetNode(node_));
  std::string uid = node.value("metadata", json::object()).value("uid", "");
  if (uid.empty()) return Internal("Node " + node_ + " has no metadata.uid");
  std::lock_guard<std::mutex> l(mu_);
  node_uid_ = uid;
  return uid;
}

Status SlicePublisher::SyncOnce() {
  std::lock_guard<std::mutex> sync_lock(sync_mu_);
  std::optional<std::vector<model::PublishedDevice>> devices;
  {
    std::lock_guard<std::mutex> l(mu_);
    devices = devices_;
  }
  uint64_t creates = 0, updates = 0, deletes = 0;
  int64_t generation = 0;
  size_t slice_count = 0;
  auto sync = [&]() -> Status {
    if (!devices) return Status::Ok();  // discovery not done: publish nothing
    NVDRA_ASSIGN_OR_RETURN(std::string version, client_.ResourceApiVersion());
    NVDRA_ASSIGN_OR_RETURN(std::string node_uid, NodeUid());
    const std::string base = "/apis/resource.k8s.io/" + version + "/resourceslices";
    auto listed = client_.ListJson(base, "", "spec.nodeName=" + node_ + ",spec.driver=" + driver_);
    if (!listed.ok() && listed.status().code() == StatusCode::kNotFound) client_.ForgetResourceApiVersion();
    if (!listed.ok()) return listed.status().Wrap("list ResourceSlices of node " + node_);

    std::vector<Existing> existing;
    int64_t max_gen = 0;
    for (const auto& item : listed->value("items", json::array())) {
      Existing e;
      const json& meta = item.value("metadata", json::object());
      e.name = meta.value("name", "");
      e.uid = meta.value("uid", "");
      e.resource_version = meta.value("resourceVersion", "");
      e.spec = item.value("spec", json::object());
      const json& pool = e.spec.value("pool", json::object());
      // Only our pool is indexed; any other pool of ours on this node is obsolete.
      if (pool.value("name", "") == node_) {
        e.index = IndexFromName(e.name, driver_, node_);
        e.generation = pool.value("generation", int64_t{0});
        max_gen = std::max(max_gen, e.generation);
      }
      existing.push_back(std::move(e));
    }
    std::sort(existing.begin(), existing.end(), [](const Existing& a, const Existing& b) { return a.name < b.name; });

    auto chunks = ChunkDevices(*devices);
    // An empty inventory is still a pool: one slice without devices tells
    // the scheduler the node has nothing, rather than "not published yet".
    if (chunks.empty()) chunks.emplace_back();
    const size_t n = chunks.size();

    auto desired = [&](size_t i, int64_t gen) {
      return BuildSliceSpec(driver_, node_, PoolRef{node_, gen, static_cast<int64_t>(n)}, chunks[i], version);
    };
    // The content changed when a slice of the newest generation disagrees
    // with what we want at its index (or lies beyond the pool's end). Only
    // missing slices (deleted by someone else) do not need a new generation.
    bool changed = max_gen == 0;
    for (const auto& e : existing) {
      if (!e.index || e.generation != max_gen) continue;
      if (*e.index >= n || Comparable(e.spec) != Comparable(desired(*e.index, max_gen))) changed = true;
    }
    generation = changed ? max_gen + 1 : max_gen;

    // Pick, per index, the slice to keep (already right, else the first of
    // that index to update); everything else is obsolete.
    std::vector<const Existing*> keep(n, nullptr);
    std::vector<bool> keep_ok(n, false);
    for (const auto& e : existing) {
      if (!e.index || *e.index >= n) continue;
      size_t i = *e.index;
      bool ok = Comparable(e.spec) == Comparable(desired(i, generation));
      if (keep[i] == nullptr || (ok && !keep_ok[i])) {
        keep[i] = &e;
        keep_ok[i] = ok;
      }
    }
    for (const auto& e : existing) {
      bool kept = e.index && *e.index < n && keep[*e.index] == &e;
      if (kept) continue;
      Status s = client_.Delete(base + "/" + e.name, e.uid, e.resource_version);
      if (!s.ok() && s.code() != StatusCode::kNotFound) return s.Wrap("delete obsolete ResourceSlice " + e.name);
      ++deletes;
    }
    json owner = json::array({{{"apiVersion", "v1"},
                               {"kind", "Node"},
                               {"name", node_},
                               {"uid", node_uid},
                               {"controller", true}}});
    for (size_t i = 0; i < n; ++i) {
      if (keep[i] != nullptr && keep_ok[i]) continue;
      json spec = desired(i, generation);
      if (keep[i] != nullptr) {
        json obj = {{"apiVersion", "resource.k8s.io/" + version},
                    {"kind", "ResourceSlice"},
                    {"metadata", {{"name", keep[i]->name}, {"resourceVersion", keep[i]->resource_version},
                                  {"ownerReferences", owner}}},
                    {"spec", spec}};
        auto r = client_.UpdateJson(base + "/" + keep[i]->name, obj);
        if (!r.ok()) return r.status().Wrap("update ResourceSlice " + keep[i]->name);
        ++updates;
      } else {
        json obj = {{"apiVersion", "resource.k8s.io/" + version},
                    {"kind", "ResourceSlice"},
                    {"metadata", {{"generateName", GenerateName(i, driver_, node_)}, {"ownerReferences", owner}}},
                    {"spec", spec}};
        auto r = client_.CreateJson(base, obj);
        if (!r.ok()) return r.status().Wrap("create ResourceSlice " + std::to_string(i) + " of pool " + node_);
        ++creates;
      }
    }
    slice_count = n;
    return Status::Ok();
  };
  Status s = sync();
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.syncs;
    stats_.creates += creates;
    stats_.updates += updates;
    stats_.deletes += deletes;
    if (s.ok()) {
      if (devices) {
        stats_.generation = generation;
        stats_.slices = slice_count;
      }
      stats_.last_error = Status::Ok();
    } else {
      ++stats_.failed_syncs;
      stats_.last_error = s;
    }
  }
  cv_.notify_all();
  if (!s.ok()) {
    NVDRA_VLOG(0, "ResourceSlice sync for driver {} failed: {}", driver_, s.ToString());
    bool permanent = s.code() == StatusCode::kPermissionDenied || s.code() == StatusCode::kInvalidArgument;
    if (permanent && options_.events != nullptr) {
      std::string uid;
      {
        std::lock_guard<std::mutex> l(mu_);
        uid = node_uid_;
      }
      // Best effort: the recorder rate-limits, and a failed post changes nothing here.
      (void)options_.events->Record({"v1", "Node", "", node_, uid}, "Warning", "ResourceSlicePublishFailed",
                                    "publishing ResourceSlices of driver " + driver_ + " failed: " + s.message());
    }
  }
  return s;
}

void SlicePublisher::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  trigger_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void SlicePublisher::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SlicePublisher::Loop() {
  auto wait = std::chrono::milliseconds(0);
  while (true) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, wait, [&] { return stop_ || trigger_; });
      if (stop_) return;
      trigger_ = false;
    }
    Status s = SyncOnce();
    wait = s.ok() ? options_.resync_period : options_.retry_period;
  }
}

}  // namespace nvdra::kube
