// Fuzz target for watch streams: any bytes, cut into pieces as a socket
// might deliver them, go through the line reader and into a watch cache of
// one Node (kind Node, metadata.name=node-a), as the ComputeDomain plugin
// watches its Node. Whatever arrives, nothing crashes, the reader never
// scans a byte twice nor holds a line past its bound, and the cache holds
// only objects of that name with a UID, each found again by its UID and
// each UID naming one object.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "kube/kube_client.h"
#include "kube/watch_cache.h"
#include "kube/watch_line_reader.h"

namespace nvdra::kube {

class WatchCacheFuzzPeer {
 public:
  static Status Apply(WatchCache& c, const std::string& line, bool* gone) { return c.ApplyLine(line, gone); }
  static void Check(const WatchCache& c) {
    MutexLock l(c.mu_);
    for (const auto& [key, obj] : c.objects_) {
      const auto& meta = (*obj)["metadata"];
      if (!meta.is_object() || meta.value("name", "") != "node-a") std::abort();
      const std::string uid = meta.value("uid", "");
      if (uid.empty()) std::abort();
      auto it = c.by_uid_.find(uid);
      if (it == c.by_uid_.end() || it->second != key) std::abort();
    }
    if (c.by_uid_.size() != c.objects_.size()) std::abort();
  }
};

}  // namespace nvdra::kube

namespace {

// Never asked: the cache is not started, lines are fed by hand.
class NoTransport final : public nvdra::kube::HttpTransport {
 public:
  nvdra::Result<nvdra::kube::HttpResponse> RoundTrip(const nvdra::kube::HttpRequest&) override { std::abort(); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nvdra::kube;
  static KubeClient client(std::make_unique<NoTransport>());
  WatchCacheOptions o;
  o.path = "/api/v1/nodes";
  o.field_selector = "metadata.name=node-a";
  o.kind = "Node";
  o.what = "Node node-a";
  WatchCache cache(client, o);
  constexpr size_t kMaxLine = 4096;
  WatchLineReader reader("fuzz", kMaxLine);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // Pieces of a length the input picks (its first byte), as reads return them.
  size_t piece = size == 0 ? 1 : 1 + static_cast<unsigned char>(text[0]) % 97;
  size_t fed = 0;
  for (size_t at = 0; at < text.size(); at += piece) {
    auto chunk = text.substr(at, piece);
    fed += chunk.size();
    bool gone = false;
    nvdra::Status s = reader.Feed(chunk, [&](const std::string& line) {
      if (line.size() > kMaxLine) std::abort();
      (void)WatchCacheFuzzPeer::Apply(cache, line, &gone);
      WatchCacheFuzzPeer::Check(cache);
      return nvdra::Status::Ok();
    });
    if (reader.bytes_scanned() > fed) std::abort();
    if (reader.buffered() > kMaxLine + piece) std::abort();
    if (!s.ok()) break;
  }
  return 0;
}
