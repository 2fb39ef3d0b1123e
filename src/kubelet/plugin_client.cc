#include "kubelet/plugin_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>

#include "kubelet/proto/dra/v1/api.grpc.pb.h"
#include "kubelet/proto/dra/v1beta1/api.grpc.pb.h"
#include "kubelet/proto/dra_health/v1/api.grpc.pb.h"
#include "kubelet/proto/dra_health/v1alpha1/api.grpc.pb.h"
#include "kubelet/proto/pluginregistration/api.grpc.pb.h"
#include "kubelet/registration_service.h"

namespace nvdra::kubelet {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

std::shared_ptr<grpc::Channel> Dial(const std::string& path) {
  grpc::ChannelArguments args;
  // gRPC shares connections between channels to the same address by
  // default; a probe must not reuse one that outlived its socket file.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
}

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

Status FromGrpc(const grpc::Status& s, const std::string& method, const std::string& path) {
  std::string msg = fmt::format("{} on {} failed: {}: {}", method, path, GrpcCodeName(s.error_code()),
                                s.error_message());
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT: return InvalidArgument(msg);
    case grpc::StatusCode::UNAVAILABLE: return Unavailable(msg);
    case grpc::StatusCode::DEADLINE_EXCEEDED: return DeadlineExceeded(msg);
    case grpc::StatusCode::NOT_FOUND: return NotFound(msg);
    default: return Internal(msg);
  }
}

void SetDeadline(grpc::ClientContext& ctx, PluginClient::Timeout timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

// A prepare or unprepare request of either API version for `claims`.
template <typename Request>
Request RequestFor(const std::vector<ClaimRef>& claims) {
  Request req;
  for (const auto& c : claims) {
    auto* pc = req.add_claims();
    pc->set_namespace_(c.ns);
    pc->set_uid(c.uid);
    pc->set_name(c.name);
  }
  return req;
}

template <typename Stub, typename Request, typename Response, bool kShareId>
Result<std::map<std::string, PrepareResult>> DoPrepare(std::shared_ptr<grpc::Channel> channel, const std::string& path,
                                                       const std::vector<ClaimRef>& claims,
                                                       PluginClient::Timeout timeout) {
  auto stub = Stub(std::move(channel));
  Request req = RequestFor<Request>(claims);
  Response resp;
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  grpc::Status s = stub.NodePrepareResources(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s, "NodePrepareResources", path);
  std::map<std::string, PrepareResult> out;
  for (const auto& [uid, r] : resp.claims()) {
    PrepareResult& pr = out[uid];
    pr.error = r.error();
    for (const auto& d : r.devices()) {
      PreparedDevice pd;
      pd.requests.assign(d.request_names().begin(), d.request_names().end());
      pd.pool = d.pool_name();
      pd.device = d.device_name();
      pd.cdi_device_ids.assign(d.cdi_device_ids().begin(), d.cdi_device_ids().end());
      if constexpr (kShareId) {
        if (d.has_share_id()) pd.share_id = d.share_id();
      }
      pr.devices.push_back(std::move(pd));
    }
  }
  return out;
}

template <typename Stub, typename Request, typename Response>
Result<std::map<std::string, std::string>> DoUnprepare(std::shared_ptr<grpc::Channel> channel, const std::string& path,
                                                       const std::vector<ClaimRef>& claims,
                                                       PluginClient::Timeout timeout) {
  auto stub = Stub(std::move(channel));
  Request req = RequestFor<Request>(claims);
  Response resp;
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  grpc::Status s = stub.NodeUnprepareResources(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s, "NodeUnprepareResources", path);
  std::map<std::string, std::string> out;
  for (const auto& [uid, r] : resp.claims()) out[uid] = r.error();
  return out;
}

template <typename Stub, typename Request, typename Response, bool kV1>
Status DoWatch(std::shared_ptr<grpc::Channel> channel, const std::string& path, PluginClient::Timeout timeout,
               const std::function<bool(const std::vector<DeviceHealth>&)>& on_message) {
  auto stub = Stub(std::move(channel));
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  Request req;
  auto reader = stub.NodeWatchResources(&ctx, req);
  Response resp;
  bool stopped_by_caller = false;
  while (reader->Read(&resp)) {
    std::vector<DeviceHealth> devices;
    for (const auto& d : resp.devices()) {
      DeviceHealth h;
      h.pool = d.device().pool_name();
      h.device = d.device().device_name();
      h.health = static_cast<DeviceHealthStatus>(d.health());
      h.last_updated_unix = d.last_updated_time();
      if constexpr (kV1) {
        h.health_check_timeout_seconds = d.health_check_timeout_seconds();
        h.message = d.message();
      }
      devices.push_back(std::move(h));
    }
    if (!on_message(devices)) {
      stopped_by_caller = true;
      ctx.TryCancel();
      break;
    }
  }
  grpc::Status s = reader->Finish();
  if (stopped_by_caller || s.ok() || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Status::Ok();
  }
  return FromGrpc(s, "NodeWatchResources", path);
}

}  // namespace

std::vector<std::string> ValidatePluginInfo(const PluginInfo& info, const std::string& expected_driver) {
  std::vector<std::string> problems;
  if (info.type != kDraPluginType) {
    problems.push_back(fmt::format("type is \"{}\", want \"{}\"", info.type, kDraPluginType));
  }
  if (info.name.empty()) problems.push_back("name is empty");
  if (!expected_driver.empty() && info.name != expected_driver) {
    problems.push_back(fmt::format("name is \"{}\", want \"{}\"", info.name, expected_driver));
  }
  struct stat st;
  if (info.endpoint.empty() || info.endpoint.front() != '/') {
    problems.push_back(fmt::format("endpoint \"{}\" is not an absolute path", info.endpoint));
  } else if (::stat(info.endpoint.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    problems.push_back(fmt::format("endpoint {} is not an existing socket", info.endpoint));
  }
  const auto& v = info.supported_versions;
  auto has = [&](const char* s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  if (!has(kDraV1Service) && !has(kDraV1beta1Service)) {
    problems.push_back(fmt::format("supported_versions lists neither {} nor {}", kDraV1Service, kDraV1beta1Service));
  }
  for (const auto& s : v) {
    if (s != kDraV1Service && s != kDraV1beta1Service && s != kHealthV1Service && s != kHealthV1alpha1Service) {
      problems.push_back(fmt::format("supported_versions has unknown entry \"{}\"", s));
    }
  }
  return problems;
}

PluginClient::PluginClient(std::string socket_path, Connection connection) : socket_path_(std::move(socket_path)) {
  if (connection == Connection::kHold) held_ = Dial(socket_path_);
}

PluginClient::~PluginClient() = default;

std::shared_ptr<grpc::Channel> PluginClient::Channel() const { return held_ ? held_ : Dial(socket_path_); }

Result<PluginInfo> PluginClient::GetInfo(Timeout timeout) const {
  pluginregistration::Registration::Stub stub(Channel());
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  pluginregistration::InfoRequest req;
  pluginregistration::PluginInfo resp;
  grpc::Status s = stub.GetInfo(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s, "GetInfo", socket_path_);
  PluginInfo info{resp.type(), resp.name(), resp.endpoint(), {}};
  info.supported_versions.assign(resp.supported_versions().begin(), resp.supported_versions().end());
  return info;
}

Status PluginClient::NotifyRegistrationStatus(bool registered, const std::string& error, Timeout timeout) const {
  pluginregistration::Registration::Stub stub(Channel());
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  pluginregistration::RegistrationStatus req;
  req.set_plugin_registered(registered);
  req.set_error(error);
  pluginregistration::RegistrationStatusResponse resp;
  grpc::Status s = stub.NotifyRegistrationStatus(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s, "NotifyRegistrationStatus", socket_path_);
  return Status::Ok();
}

Result<std::map<std::string, PrepareResult>> PluginClient::Prepare(DraApi api, const std::vector<ClaimRef>& claims,
                                                                   Timeout timeout) const {
  if (api == DraApi::kV1) {
    return DoPrepare<drav1::DRAPlugin::Stub, drav1::NodePrepareResourcesRequest, drav1::NodePrepareResourcesResponse,
                     true>(Channel(), socket_path_, claims, timeout);
  }
  return DoPrepare<drav1beta1::DRAPlugin::Stub, drav1beta1::NodePrepareResourcesRequest,
                   drav1beta1::NodePrepareResourcesResponse, false>(Channel(), socket_path_, claims, timeout);
}

Result<std::map<std::string, std::string>> PluginClient::Unprepare(DraApi api, const std::vector<ClaimRef>& claims,
                                                                   Timeout timeout) const {
  if (api == DraApi::kV1) {
    return DoUnprepare<drav1::DRAPlugin::Stub, drav1::NodeUnprepareResourcesRequest,
                       drav1::NodeUnprepareResourcesResponse>(Channel(), socket_path_, claims, timeout);
  }
  return DoUnprepare<drav1beta1::DRAPlugin::Stub, drav1beta1::NodeUnprepareResourcesRequest,
                     drav1beta1::NodeUnprepareResourcesResponse>(Channel(), socket_path_, claims, timeout);
}

Status PluginClient::WatchHealth(HealthApi api, Timeout timeout,
                                 const std::function<bool(const std::vector<DeviceHealth>&)>& on_message) const {
  if (api == HealthApi::kV1) {
    return DoWatch<::v1::DRAResourceHealth::Stub, ::v1::NodeWatchResourcesRequest, ::v1::NodeWatchResourcesResponse,
                   true>(Channel(), socket_path_, timeout, on_message);
  }
  return DoWatch<::v1alpha1::DRAResourceHealth::Stub, ::v1alpha1::NodeWatchResourcesRequest,
                 ::v1alpha1::NodeWatchResourcesResponse, false>(Channel(), socket_path_, timeout, on_message);
}

}  // namespace nvdra::kubelet
