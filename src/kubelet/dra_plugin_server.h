// Everything the kubelet sees of one DRA driver: the DRA socket
// (<plugins-dir>/<driver>/dra[-<id>].sock) serving DRAPlugin v1 and v1beta1
// and, when enabled, DRAResourceHealth v1 and v1alpha1; and the registration
// socket (<registrar-dir>/<driver>[-<id>]-reg.sock). A rolling-update id lets
// an old and a new plugin pod serve side by side during an upgrade.
#pragma once

#include <grpcpp/server.h>

#include <chrono>
#include <memory>
#include <string>

#include "kubelet/claim_dispatcher.h"
#include "kubelet/device_health_broadcaster.h"
#include "kubelet/socket_file.h"
#include "kubelet/timer_thread.h"
#include "util/status.h"

namespace nvdra::kubelet {

class DraV1Service;
class DraV1beta1Service;
class DeviceHealthV1Service;
class DeviceHealthV1alpha1Service;
class RegistrationService;

struct DraPluginOptions {
  std::string driver_name;  // e.g. "gpu.nvidia.com"
  std::string plugins_dir = "/var/lib/kubelet/plugins";
  std::string registrar_dir = "/var/lib/kubelet/plugins_registry";
  // Empty: dra.sock and <driver>-reg.sock. Else dra-<id>.sock and
  // <driver>-<id>-reg.sock; letters, digits and '-' (a pod UID fits).
  std::string rolling_update_id;
  // Non-null: serve and advertise device health streaming from this source.
  DeviceHealthSource* health_source = nullptr;
  DispatcherOptions dispatcher;
  // Where the calls' deadlines are kept: the plugin's one timer thread,
  // which gRPC's EventEngine shares (grpc_event_engine.h). Null: a thread
  // of the server's own.
  std::shared_ptr<TimerThread> timers;
};

struct PluginSocketPaths {
  std::string plugin_dir;    // <plugins-dir>/<driver>
  std::string dra;           // the endpoint GetInfo reports
  std::string registration;  // what the kubelet's plugin watcher finds
};

// The socket names for `options`, or InvalidArgument for a bad driver name,
// rolling-update id or relative directory.
Result<PluginSocketPaths> SocketPathsFor(const DraPluginOptions& options);

// FailedPrecondition when another process still serves either socket of
// `options` (same driver and rolling-update id): a second instance must not
// start, and callers check this before any other side effect of starting.
Status CheckNoLiveInstance(const DraPluginOptions& options);

class DraPluginServer {
 public:
  // Replaces stale sockets, starts the server and publishes its sockets
  // (the DRA socket first, so the kubelet never learns of an endpoint that
  // does not answer yet). Refuses (FailedPrecondition) while another
  // process serves either socket.
  static Result<std::unique_ptr<DraPluginServer>> Start(ClaimEngine& engine, DraPluginOptions options);
  ~DraPluginServer();  // Stop()

  // Stops serving, removes our sockets (only if they still are ours), then
  // waits for engine calls in flight. Idempotent.
  void Stop();

  // OK when both sockets still are ours and answer a fresh connection
  // (GetInfo, and an empty NodePrepareResources), within `timeout` each.
  Status CheckLiveness(std::chrono::milliseconds timeout) const;

  const PluginSocketPaths& paths() const { return paths_; }
  const RegistrationService& registration() const { return *registration_; }
  ClaimDispatcher& dispatcher() { return *dispatcher_; }

 private:
  DraPluginServer() = default;

  DraPluginOptions options_;
  PluginSocketPaths paths_;
  std::shared_ptr<TimerThread> timers_;
  std::unique_ptr<ClaimDispatcher> dispatcher_;
  std::unique_ptr<DraV1Service> v1_;
  std::unique_ptr<DraV1beta1Service> v1beta1_;
  std::unique_ptr<DeviceHealthV1Service> health_v1_;
  std::unique_ptr<DeviceHealthV1alpha1Service> health_v1alpha1_;
  std::unique_ptr<RegistrationService> registration_;
  // Serves the DRA, device health and registration services on both sockets.
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<SocketFile> dra_socket_;
  std::unique_ptr<SocketFile> registration_socket_;
  bool stopped_ = false;
};

}  // namespace nvdra::kubelet
