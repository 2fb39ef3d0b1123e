#include "kube/watch_cache.h"

#include <algorithm>

#include "util/json_depth.h"
#include "util/json_reader.h"
#include "util/log.h"
#include "util/run_guarded.h"
#include "util/thread_name.h"

namespace nvdra::kube {

using nlohmann::json;
using Steady = std::chrono::steady_clock;

uint64_t ChangeNotifier::version() const {
  MutexLock l(mu_);
  return version_;
}

void ChangeNotifier::Bump() {
  {
    MutexLock l(mu_);
    ++version_;
  }
  cv_.NotifyAll();
}

uint64_t ChangeNotifier::WaitForChange(uint64_t seen, Steady::time_point deadline) const {
  MutexLock l(mu_);
  cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return version_ != seen; });
  return version_;
}

namespace {

// Best effort: the cache holds objects of any kind and shape; what cannot
// be read as a string reads as "".
std::string Str(const json& j, const char* key) { return JsonReader(j).ValueOr<std::string>(key, ""); }

const json& Meta(const json& obj) { return JsonReader(obj).Field("metadata").value(); }

std::string Key(const json& obj) { return Str(Meta(obj), "namespace") + "/" + Str(Meta(obj), "name"); }

// The name a field selector pins ("metadata.name=n1,..." -> "n1"); "" when
// it pins none.
std::string SelectedName(const std::string& selector) {
  constexpr std::string_view kTerm = "metadata.name=";
  size_t start = 0;
  while (start <= selector.size()) {
    size_t end = selector.find(',', start);
    if (end == std::string::npos) end = selector.size();
    std::string_view term(selector.data() + start, end - start);
    if (term.substr(0, kTerm.size()) == kTerm) return std::string(term.substr(kTerm.size()));
    start = end + 1;
  }
  return "";
}

}  // namespace

WatchCache::WatchCache(KubeClient& client, WatchCacheOptions options)
    : client_(client),
      options_(std::move(options)),
      notifier_(options_.notifier ? options_.notifier : std::make_shared<ChangeNotifier>()) {}

WatchCache::~WatchCache() { Stop(); }

void WatchCache::Start() {
  if (thread_.joinable()) return;
  stop_.Reset();
  // An exception is logged and ends the watch; lookups then answer from
  // what was cached, and last_error() says why.
  thread_ = std::thread([this] {
    SetThreadName("watch " + options_.what);
    Status s = RunGuarded("the " + options_.what + " watch", [this] { Run(); });
    if (!s.ok()) SetError(s);
  });
}

void WatchCache::Stop() {
  {
    MutexLock l(mu_);
    stop_.Cancel();
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  // What the cache held stops being followed: it is dropped, so nobody reads
  // a stale copy, and the next Start lists afresh.
  {
    MutexLock l(mu_);
    const bool was_synced = synced_;
    synced_ = false;
    objects_.clear();
    by_uid_.clear();
    stats_.objects = 0;
    stats_.resource_version.clear();
    if (!was_synced) return;
  }
  notifier_->Bump();
}

bool WatchCache::WaitSynced(Steady::time_point deadline) const {
  MutexLock l(mu_);
  return cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return synced_; });
}

bool WatchCache::synced() const {
  MutexLock l(mu_);
  return synced_;
}

Status WatchCache::last_error() const {
  MutexLock l(mu_);
  return last_error_;
}

WatchCache::ObjectPtr WatchCache::Get(const std::string& ns, const std::string& name) const {
  MutexLock l(mu_);
  auto it = objects_.find(ns + "/" + name);
  return it == objects_.end() ? nullptr : it->second;
}

WatchCache::ObjectPtr WatchCache::GetByUid(const std::string& uid) const {
  MutexLock l(mu_);
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return nullptr;
  auto o = objects_.find(it->second);
  return o == objects_.end() ? nullptr : o->second;
}

std::vector<WatchCache::ObjectPtr> WatchCache::List() const {
  MutexLock l(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [k, v] : objects_) out.push_back(v);
  return out;
}

WatchCacheStats WatchCache::stats() const {
  MutexLock l(mu_);
  WatchCacheStats s = stats_;
  s.objects = objects_.size();
  return s;
}

std::string WatchCache::WithSelectors(std::string path, char sep) const {
  if (!options_.label_selector.empty()) {
    path += sep + std::string("labelSelector=") + KubeClient::QueryEscape(options_.label_selector);
    sep = '&';
  }
  if (!options_.field_selector.empty()) {
    path += sep + std::string("fieldSelector=") + KubeClient::QueryEscape(options_.field_selector);
  }
  return path;
}

void WatchCache::SleepInterruptible(std::chrono::milliseconds d) {
  MutexLock l(mu_);
  cv_.WaitFor(mu_, d, [&]() REQUIRES(mu_) { return stop_.cancelled(); });
}

void WatchCache::SetError(Status s) {
  MutexLock l(mu_);
  last_error_ = std::move(s);
}

void WatchCache::BackOff(std::chrono::milliseconds* backoff) {
  // Up to half again as long, so the caches of many nodes a broken server
  // turned away do not all come back in step.
  std::uniform_int_distribution<int64_t> extra(0, backoff->count() / 2);
  SleepInterruptible(*backoff + std::chrono::milliseconds(extra(rng_)));
  *backoff = std::min(*backoff * 2, options_.max_backoff);
}

void WatchCache::Run() {
  auto backoff = options_.initial_backoff;
  bool need_list = true;
  while (!stop_.cancelled()) {
    if (need_list) {
      Status s = ListOnce();
      SetError(s);
      if (!s.ok()) {
        NVDRA_WARN("list {}: {}; retrying in {} ms", options_.what, s.ToString(), backoff.count());
        BackOff(&backoff);
        continue;
      }
      need_list = false;
    }
    const auto started = Steady::now();
    WatchEnd end = WatchOnce();
    if (end == WatchEnd::kStopped) return;
    // A watch that lasted was healthy: the next trouble starts from the
    // first backoff again. One that ended at once (an empty 200, a 410 right
    // away) backs off before the next LIST or WATCH, or such a server gets
    // the client's whole request budget.
    const bool healthy = Steady::now() - started >= options_.min_healthy_watch;
    if (healthy) backoff = options_.initial_backoff;
    {
      MutexLock l(mu_);
      if (end == WatchEnd::kGone) {
        ++stats_.relists_after_gone;
      } else {
        ++stats_.resumes;
      }
    }
    if (end == WatchEnd::kGone) {
      // The history we would resume from is gone: only a fresh LIST can
      // tell us about deletions in the gap.
      NVDRA_VLOG(2, "watch {}: resourceVersion too old (410 Gone); listing again", options_.what);
      need_list = true;
    }
    if (end == WatchEnd::kBroken || !healthy) BackOff(&backoff);
  }
}

Status WatchCache::ListOnce() {
  {
    MutexLock l(mu_);
    ++stats_.lists;
  }
  NVDRA_ASSIGN_OR_RETURN(json list, client_.ListJson(options_.path, options_.label_selector, options_.field_selector));
  auto items = list.find("items");
  if (!list.is_object() || (items != list.end() && !items->is_array() && !items->is_null())) {
    return Internal("list " + options_.what + ": response has no items array");
  }
  std::string rv = Str(Meta(list), "resourceVersion");
  if (rv.empty()) return Internal("list " + options_.what + ": response has no resourceVersion");
  std::map<std::string, ObjectPtr> objects;
  std::map<std::string, std::string> by_uid;
  if (items != list.end() && items->is_array()) {
    for (const auto& item : *items) {
      if (!item.is_object()) continue;  // nothing a reader could look up
      if (std::string why = Foreign(item, "LIST"); !why.empty()) {
        NVDRA_WARN("list {}: ignoring {}/{}: {}", options_.what, Str(Meta(item), "namespace"), Str(Meta(item), "name"),
                   why);
        continue;
      }
      std::string key = Key(item);
      by_uid[Str(Meta(item), "uid")] = key;
      objects[key] = Keep(item);
    }
  }
  {
    MutexLock l(mu_);
    objects_ = std::move(objects);
    by_uid_ = std::move(by_uid);
    stats_.resource_version = rv;
    synced_ = true;
  }
  cv_.NotifyAll();
  notifier_->Bump();
  if (options_.on_change) options_.on_change("LIST", json());
  NVDRA_VLOG(4, "listed {} {} at resourceVersion {}", stats().objects, options_.what, rv);
  return Status::Ok();
}

std::string WatchCache::Foreign(const json& object, const std::string& type) const {
  std::string kind = Str(object, "kind");  // LIST items may omit it
  if (!options_.kind.empty() && !kind.empty() && kind != options_.kind)
    return "it is a " + kind + ", not a " + options_.kind;
  std::string name = Str(Meta(object), "name");
  std::string uid = Str(Meta(object), "uid");
  if (name.empty() || uid.empty()) return "it has no metadata.name or metadata.uid";
  std::string selected = SelectedName(options_.field_selector);
  if (!selected.empty() && name != selected) return "its name " + name + " is not the selected " + selected;
  if (type == "MODIFIED" || type == "DELETED") {
    // A UID changes only by a deletion and a new creation, never in place.
    MutexLock l(mu_);
    auto it = objects_.find(Key(object));
    if (it != objects_.end() && Str(Meta(*it->second), "uid") != uid) {
      return "its UID " + uid + " is not the UID " + Str(Meta(*it->second), "uid") + " of the cached object";
    }
  }
  return "";
}

WatchCache::ObjectPtr WatchCache::Keep(const json& object) const {
  json kept = options_.project ? options_.project(object) : object;
  if (!kept.is_object()) kept = json::object();
  // Whatever the projection keeps, the identity stays.
  json& meta = kept["metadata"];
  if (!meta.is_object()) meta = json::object();
  for (const char* field : {"namespace", "name", "uid", "resourceVersion"}) meta[field] = Str(Meta(object), field);
  return std::make_shared<const json>(std::move(kept));
}

void WatchCache::Upsert(const json& object) {
  std::string key = Key(object);
  std::string uid = Str(Meta(object), "uid");
  auto ptr = Keep(object);
  MutexLock l(mu_);
  auto old = objects_.find(key);
  if (old != objects_.end()) {
    std::string old_uid = Str(Meta(*old->second), "uid");
    if (old_uid != uid) by_uid_.erase(old_uid);
  }
  // A UID names one object: one cached under another key (an odd stream
  // that moved it) goes, so a lookup by UID and by name always agree.
  if (auto same = by_uid_.find(uid); same != by_uid_.end() && same->second != key) objects_.erase(same->second);
  objects_[key] = std::move(ptr);
  by_uid_[uid] = key;
}

void WatchCache::Erase(const json& object) {
  std::string key = Key(object);
  MutexLock l(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return;
  by_uid_.erase(Str(Meta(*it->second), "uid"));
  objects_.erase(it);
}

Status WatchCache::ApplyLine(const std::string& line, bool* gone) {
  NVDRA_RETURN_IF_ERROR(CheckJsonDepth(line, "watch " + options_.what + ": event"));
  json ev = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (ev.is_discarded()) return Internal("watch " + options_.what + ": event is not valid JSON");
  std::string type = Str(ev, "type");
  const json& obj = ev.is_object() && ev.contains("object") ? ev["object"] : json();
  if (type == "ERROR") {
    long code = obj.is_object() && obj.contains("code") && obj["code"].is_number() ? obj["code"].get<long>() : 0;
    if (code == 410) {
      *gone = true;
      return Status::Ok();
    }
    return Unavailable("watch " + options_.what + ": server sent an error: " + Str(obj, "message"));
  }
  std::string rv = Str(Meta(obj), "resourceVersion");
  if ((type == "ADDED" || type == "MODIFIED" || type == "DELETED") && !obj.is_object()) {
    return Internal("watch " + options_.what + ": " + type + " event without an object");
  }
  if (type != "ADDED" && type != "MODIFIED" && type != "DELETED" && type != "BOOKMARK") {
    return Internal("watch " + options_.what + ": unknown event type \"" + type + "\"");
  }
  std::string foreign = type == "BOOKMARK" ? "" : Foreign(obj, type);
  if (!foreign.empty()) {
    // Skipped, not a broken stream: resuming would replay the same event.
    NVDRA_WARN("watch {}: ignoring a {} event for {}/{}: {}", options_.what, type, Str(Meta(obj), "namespace"),
               Str(Meta(obj), "name"), foreign);
  } else if (type == "ADDED" || type == "MODIFIED") {
    Upsert(obj);
  } else if (type == "DELETED") {
    Erase(obj);
  }
  {
    MutexLock l(mu_);
    if (!foreign.empty()) {
      ++stats_.rejected;
    } else if (type == "BOOKMARK") {
      ++stats_.bookmarks;
    } else {
      ++stats_.events;
    }
    if (!rv.empty()) stats_.resource_version = rv;
  }
  if (foreign.empty() && type != "BOOKMARK" && options_.on_change) options_.on_change(type, obj);
  return Status::Ok();
}

WatchCache::WatchEnd WatchCache::WatchOnce() {
  std::string rv;
  {
    MutexLock l(mu_);
    rv = stats_.resource_version;
    ++stats_.watches;
  }
  // Each watch asks for a timeout drawn from [watch_timeout, 2 * watch_timeout),
  // as client-go's reflector does (minWatchTimeout): the watches of plugins
  // started together spread out instead of reconnecting all at once.
  const int64_t min_s = std::max<int64_t>(1, options_.watch_timeout.count());
  const auto watch_timeout = std::chrono::seconds(std::uniform_int_distribution<int64_t>(min_s, 2 * min_s - 1)(rng_));
  std::string path = options_.path +
                     "?watch=1&allowWatchBookmarks=true&resourceVersion=" + KubeClient::QueryEscape(rv) +
                     "&timeoutSeconds=" + std::to_string(watch_timeout.count());
  path = WithSelectors(path, '&');
  WatchLineReader lines("watch " + options_.what, options_.max_event_bytes);
  bool gone = false;
  Status stream_error;
  auto sink = [&](std::string_view data) {
    bool changed = false;
    Status s = lines.Feed(data, [&](const std::string& line) {
      NVDRA_RETURN_IF_ERROR(ApplyLine(line, &gone));
      if (gone) return Unavailable("410 Gone");  // stops the reader; gone says why
      changed = true;
      return Status::Ok();
    });
    if (!s.ok() && !gone) stream_error = s;
    if (changed) notifier_->Bump();
    return stream_error.ok() && !gone && !stop_.cancelled();
  };
  auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(watch_timeout) + std::chrono::seconds(30);
  auto r = client_.Stream(path, timeout, sink, &stop_);
  if (stop_.cancelled()) return WatchEnd::kStopped;
  if (gone) return WatchEnd::kGone;
  if (!r.ok()) {
    SetError(r.status());
    NVDRA_VLOG(2, "watch {}: {}; resuming from resourceVersion {}", options_.what, r.status().ToString(), rv);
    return WatchEnd::kBroken;
  }
  if (r->status == 410) return WatchEnd::kGone;
  if (r->status / 100 != 2) {
    Status s = StatusFromResponse("GET", path, *r);
    SetError(s);
    NVDRA_WARN("watch {}: {}", options_.what, s.ToString());
    return WatchEnd::kBroken;
  }
  if (!stream_error.ok()) {
    SetError(stream_error);
    NVDRA_WARN("{}", stream_error.ToString());
    return WatchEnd::kBroken;
  }
  SetError(Status::Ok());
  return WatchEnd::kEnded;
}

}  // namespace nvdra::kube
