#include "kubelet/dra_plugin_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <future>
#include <thread>

#include "kubelet/device_health_service.h"
#include "kubelet/dra_service.h"
#include "kubelet/plugin_client.h"
#include "kubelet/registration_service.h"
#include "kubelet/server_threads.h"
#include "util/log.h"
#include "util/uid.h"

namespace nvdra::kubelet {
namespace {

// How long Stop() lets in-flight calls finish before cancelling them.
constexpr auto kShutdownGrace = std::chrono::seconds(2);

// One server answers on both sockets. The DRA and registration services are
// callback services: gRPC's fixed callback threads run their handlers and no
// call holds a thread while its claims run (docs/architecture.md, "Threads
// of the kubelet-facing server"). The synchronous limits below only apply
// to the device health streams, when served. Only Unix sockets are served
// here: the TCP liveness endpoint is a server of its own (health_server.h),
// so no DRA call is reachable from the network.
Result<std::unique_ptr<grpc::Server>> Serve(const std::vector<const SocketFile*>& sockets,
                                            const std::vector<grpc::Service*>& services) {
  grpc::ServerBuilder builder;
  LimitServerThreads(builder);
  // No bandwidth-delay probing: its ping timer is the one gRPC timer that
  // fires while calls flow, and each firing with no spare timer thread
  // makes gRPC's timer manager start one more, for good. Kubelet messages
  // are small; a window tuned to the link buys nothing here.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  for (const SocketFile* socket : sockets) {
    builder.AddListeningPort("unix:" + socket->bind_path(), grpc::InsecureServerCredentials());
  }
  for (auto* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::string paths;
    for (const SocketFile* socket : sockets) paths += (paths.empty() ? "" : " and ") + socket->bind_path();
    return Internal(fmt::format("cannot serve gRPC on {} (is the directory writable?)", paths));
  }
  return server;
}

}  // namespace

Result<PluginSocketPaths> SocketPathsFor(const DraPluginOptions& o) {
  if (!IsValidObjectName(o.driver_name)) {
    return InvalidArgument(fmt::format("driver name \"{}\" is not a valid DNS subdomain (like gpu.nvidia.com)",
                                       o.driver_name));
  }
  if (!o.rolling_update_id.empty() && !IsValidClaimUid(o.rolling_update_id)) {
    return InvalidArgument(fmt::format(
        "rolling-update id \"{}\" must be letters, digits and '-' (for example the pod UID)", o.rolling_update_id));
  }
  if (o.plugins_dir.empty() || o.plugins_dir.front() != '/' || o.registrar_dir.empty() ||
      o.registrar_dir.front() != '/') {
    return InvalidArgument(
        fmt::format("kubelet plugins directory \"{}\" and registrar directory \"{}\" must be absolute paths",
                    o.plugins_dir, o.registrar_dir));
  }
  PluginSocketPaths p;
  p.plugin_dir = o.plugins_dir + "/" + o.driver_name;
  if (o.rolling_update_id.empty()) {
    p.dra = p.plugin_dir + "/dra.sock";
    p.registration = o.registrar_dir + "/" + o.driver_name + "-reg.sock";
  } else {
    p.dra = p.plugin_dir + "/dra-" + o.rolling_update_id + ".sock";
    p.registration = o.registrar_dir + "/" + o.driver_name + "-" + o.rolling_update_id + "-reg.sock";
  }
  return p;
}

Status CheckNoLiveInstance(const DraPluginOptions& options) {
  NVDRA_ASSIGN_OR_RETURN(PluginSocketPaths paths, SocketPathsFor(options));
  for (const std::string& path : {paths.registration, paths.dra}) {
    if (SocketAnswers(path)) {
      return FailedPrecondition(
          fmt::format("another {} plugin is running and serving {}; refusing to start a second instance on the "
                      "same sockets (stop the other one first, or give each instance its own --rolling-update-id)",
                      options.driver_name, path));
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<DraPluginServer>> DraPluginServer::Start(ClaimEngine& engine, DraPluginOptions options) {
  NVDRA_ASSIGN_OR_RETURN(PluginSocketPaths paths, SocketPathsFor(options));
  NVDRA_RETURN_IF_ERROR(CheckNoLiveInstance(options));
  std::unique_ptr<DraPluginServer> s(new DraPluginServer());
  s->options_ = options;
  s->paths_ = paths;
  s->timers_ = options.timers ? options.timers : std::make_shared<TimerThread>("call-deadlines");
  s->dispatcher_ = std::make_unique<ClaimDispatcher>(engine, options.dispatcher);
  s->v1_ = std::make_unique<DraV1Service>(*s->dispatcher_, *s->timers_);
  s->v1beta1_ = std::make_unique<DraV1beta1Service>(*s->dispatcher_, *s->timers_);
  std::vector<grpc::Service*> dra_services{s->v1_.get(), s->v1beta1_.get()};
  if (options.health_source) {
    s->health_v1_ = std::make_unique<DeviceHealthV1Service>(*options.health_source);
    s->health_v1alpha1_ = std::make_unique<DeviceHealthV1alpha1Service>(*options.health_source);
    dra_services.push_back(s->health_v1_.get());
    dra_services.push_back(s->health_v1alpha1_.get());
  }
  s->registration_ = std::make_unique<RegistrationService>(options.driver_name, paths.dra,
                                                           SupportedVersions(options.health_source != nullptr));

  NVDRA_ASSIGN_OR_RETURN(SocketFile dra_socket, SocketFile::Prepare(paths.dra));
  s->dra_socket_ = std::make_unique<SocketFile>(std::move(dra_socket));
  NVDRA_ASSIGN_OR_RETURN(SocketFile reg_socket, SocketFile::Prepare(paths.registration));
  s->registration_socket_ = std::make_unique<SocketFile>(std::move(reg_socket));
  std::vector<grpc::Service*> services = dra_services;
  services.push_back(s->registration_.get());
  NVDRA_ASSIGN_OR_RETURN(s->server_, Serve({s->dra_socket_.get(), s->registration_socket_.get()}, services));
  // The DRA socket first, so the kubelet never learns of an endpoint that
  // does not answer yet.
  NVDRA_RETURN_IF_ERROR(s->dra_socket_->Publish());
  NVDRA_RETURN_IF_ERROR(s->registration_socket_->Publish());
  NVDRA_INFO("DRA driver {} serving {} and registration socket {}", options.driver_name, paths.dra, paths.registration);
  return s;
}

DraPluginServer::~DraPluginServer() { Stop(); }

void DraPluginServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // Registration first: once its socket is gone the kubelet stops routing
  // to us, before the DRA socket goes away.
  if (registration_socket_) {
    if (Status st = registration_socket_->RemoveIfOurs(); !st.ok()) NVDRA_ERROR("{}", st.message());
  }
  // End health streams and answer calls waiting for claims, so the server
  // can finish its calls promptly; engine calls still running are waited
  // for in the background of this shutdown.
  if (health_v1_) health_v1_->Stop();
  if (health_v1alpha1_) health_v1alpha1_->Stop();
  std::thread dispatcher_stop;
  if (dispatcher_) {
    dispatcher_->BeginShutdown();
    dispatcher_stop = std::thread([d = dispatcher_.get()] { d->Shutdown(); });
  }
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  if (dra_socket_) {
    if (Status st = dra_socket_->RemoveIfOurs(); !st.ok()) NVDRA_ERROR("{}", st.message());
  }
  if (dispatcher_stop.joinable()) dispatcher_stop.join();
  if (server_) server_->Wait();
  // Every call is answered: no deadline of ours may fire on the dispatcher
  // after this returns, nor still be running.
  if (timers_ && dispatcher_) {
    timers_->CancelAll(dispatcher_.get());
    std::promise<void> drained;
    timers_->RunAt(TimerThread::Clock::now(), [&drained] { drained.set_value(); });
    drained.get_future().wait();
  }
  NVDRA_INFO("DRA driver {} stopped", options_.driver_name);
}

Status DraPluginServer::CheckLiveness(std::chrono::milliseconds timeout) const {
  if (stopped_) return Unavailable("plugin is stopping");
  for (const SocketFile* sock : {registration_socket_.get(), dra_socket_.get()}) {
    if (!sock->StillOurs()) {
      return Unavailable(fmt::format("socket {} was removed or replaced by another process", sock->path()));
    }
  }
  NVDRA_ASSIGN_OR_RETURN(PluginInfo info, PluginClient(paths_.registration).GetInfo(timeout));
  (void)info;
  NVDRA_ASSIGN_OR_RETURN(auto prepared, PluginClient(paths_.dra).Prepare(DraApi::kV1, {}, timeout));
  (void)prepared;
  return Status::Ok();
}

}  // namespace nvdra::kubelet
