#include "config/config_kind.h"

#include <algorithm>

#include "util/mutex.h"

namespace nvdra::config {
namespace {

struct Registry {
  SharedMutex mu;
  std::vector<const ConfigKind*> kinds GUARDED_BY(mu);
};

// Built on first use, so registering from a static initializer is safe.
Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

Status RegisterConfigKind(const ConfigKind& kind) {
  if (kind.api_version.empty() || kind.kind.empty() || !kind.decode) {
    return InvalidArgument("a config kind needs an apiVersion, a kind and a decoder");
  }
  Registry& r = TheRegistry();
  WriterMutexLock lock(r.mu);
  for (const ConfigKind* k : r.kinds) {
    if (k == &kind) return Status::Ok();
    if (k->api_version == kind.api_version && k->kind == kind.kind) {
      return AlreadyExists("config kind " + kind.kind + " of " + kind.api_version + " is registered already");
    }
  }
  r.kinds.push_back(&kind);
  return Status::Ok();
}

const ConfigKind* FindConfigKind(std::string_view api_version, std::string_view kind) {
  Registry& r = TheRegistry();
  ReaderMutexLock lock(r.mu);
  auto it = std::find_if(r.kinds.begin(), r.kinds.end(),
                         [&](const ConfigKind* k) { return k->api_version == api_version && k->kind == kind; });
  return it == r.kinds.end() ? nullptr : *it;
}

std::vector<const ConfigKind*> RegisteredConfigKinds() {
  Registry& r = TheRegistry();
  ReaderMutexLock lock(r.mu);
  return r.kinds;
}

}  // namespace nvdra::config
