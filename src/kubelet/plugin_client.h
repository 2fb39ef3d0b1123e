// Talks to a DRA kubelet plugin the way the kubelet does: the registration
// handshake, NodePrepareResources / NodeUnprepareResources in v1 or v1beta1,
// and the device health stream. Used by nvdractl (the kubelet stand-in) and
// by the liveness probe. By default every call dials afresh, so a probe
// notices a socket that was removed or replaced even while an old connection
// still works; a client built with Connection::kHold keeps one channel for
// all its calls, as the kubelet does (benchmarks measure the plugin, not
// connection setup).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kubelet/claim_engine.h"
#include "kubelet/device_health_broadcaster.h"
#include "util/status.h"

namespace grpc {
class Channel;
}

namespace nvdra::kubelet {

enum class DraApi { kV1, kV1beta1 };

// One claim's answer as the wire carries it: the error is text only.
struct PrepareResult {
  std::vector<PreparedDevice> devices;
  std::string error;  // empty on success
};
enum class HealthApi { kV1, kV1alpha1 };

struct PluginInfo {
  std::string type;
  std::string name;
  std::string endpoint;
  std::vector<std::string> supported_versions;
};

// What the kubelet checks before it uses a plugin, plus what a careful one
// would: empty when the answer is acceptable, else one line per problem.
// `expected_driver` may be empty (any name).
std::vector<std::string> ValidatePluginInfo(const PluginInfo& info, const std::string& expected_driver = "");

class PluginClient {
 public:
  using Timeout = std::chrono::milliseconds;

  enum class Connection { kPerCall, kHold };

  // `socket_path`: a Unix socket path (registration or DRA socket).
  explicit PluginClient(std::string socket_path, Connection connection = Connection::kPerCall);
  ~PluginClient();

  Result<PluginInfo> GetInfo(Timeout timeout) const;
  Status NotifyRegistrationStatus(bool registered, const std::string& error, Timeout timeout) const;

  // Per-claim answers keyed by UID exactly as the plugin sent them; a
  // non-OK Status for a transport or top-level error.
  Result<std::map<std::string, PrepareResult>> Prepare(DraApi api, const std::vector<ClaimRef>& claims,
                                                       Timeout timeout) const;
  Result<std::map<std::string, std::string>> Unprepare(DraApi api, const std::vector<ClaimRef>& claims,
                                                       Timeout timeout) const;

  // Calls `on_message` for each message of the stream until it returns
  // false, the stream ends, or `timeout` passes (then OK: a watch that saw
  // no news is not an error). Non-OK for a failed stream.
  Status WatchHealth(HealthApi api, Timeout timeout,
                     const std::function<bool(const std::vector<DeviceHealth>&)>& on_message) const;

  const std::string& socket_path() const { return socket_path_; }

 private:
  // The held channel, or a fresh one per call.
  std::shared_ptr<grpc::Channel> Channel() const;

  std::string socket_path_;
  std::shared_ptr<grpc::Channel> held_;  // set only for Connection::kHold; thread-safe to share
};

}  // namespace nvdra::kubelet
