// Where the ComputeDomain plugin learns about ComputeDomains (the
// resource.nvidia.com/v1beta1 custom resource): its name and namespace for a
// domain UID, and whether this node is ready in it. The production
// implementation is DomainWatch (watch-backed, no API call per lookup);
// tests use an in-memory one.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "util/status.h"

namespace nvdra::computedomain {

struct ComputeDomainInfo {
  std::string uid, ns, name;
  bool node_ready = false;  // this node's IMEX daemon reports Ready
  // Why the node is not ready, naming the object and field looked at.
  std::string not_ready;
};

class ComputeDomainSource {
 public:
  virtual ~ComputeDomainSource() = default;
  // kNotFound when no ComputeDomain has that UID; kUnavailable on API errors.
  virtual Result<ComputeDomainInfo> Get(const std::string& domain_uid) = 0;

  // Waits until this node is ready in the domain or `deadline` passes and
  // returns the last answer (check node_ready). Must hold no lock while
  // waiting. The default polls Get with backoff; DomainWatch wakes on the
  // watch's changes instead.
  virtual Result<ComputeDomainInfo> WaitReady(const std::string& domain_uid,
                                              std::chrono::steady_clock::time_point deadline) {
    auto delay = std::chrono::milliseconds(50);
    for (;;) {
      auto info = Get(domain_uid);
      if (!info.ok() || info->node_ready) return info;
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return info;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(delay, deadline - now));
      delay = std::min(delay * 2, std::chrono::milliseconds(1000));
    }
  }
};

}  // namespace nvdra::computedomain
