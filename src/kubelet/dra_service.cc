#include "kubelet/dra_service.h"

#include "kubelet/device_list.h"
#include "kubelet/grpc_barrier.h"
#include "util/log.h"

namespace nvdra::kubelet {
namespace {

template <typename Request>
std::vector<ClaimRef> ClaimsOf(const Request& req) {
  std::vector<ClaimRef> claims;
  claims.reserve(req.claims_size());
  for (const auto& c : req.claims()) claims.push_back({c.namespace_(), c.uid(), c.name()});
  return claims;
}

// A claim's error as the kubelet gets it: the Status's message, word for
// word. A failure without a message must not read as success (the kubelet
// takes an empty error for one), so it says the code's name.
std::string ClaimError(const Status& s) {
  if (s.ok()) return "";
  return s.message().empty() ? std::string(StatusCodeName(s.code())) : s.message();
}

grpc::Status ToGrpc(const Status& s) {
  return grpc::Status(s.code() == StatusCode::kInvalidArgument ? grpc::StatusCode::INVALID_ARGUMENT
                                                               : grpc::StatusCode::INTERNAL,
                      s.message());
}

// Times the call on this thread (util/request_steps.h) and hands the record
// to the engine's metrics once the answer is built.
class CallSteps {
 public:
  CallSteps(ClaimDispatcher& dispatcher, bool prepare)
      : dispatcher_(dispatcher), prepare_(prepare), steps_(RequestStep::kRpcOther), scope_(&steps_) {}
  CallSteps(const CallSteps&) = delete;
  CallSteps& operator=(const CallSteps&) = delete;
  ~CallSteps() {
    steps_.Finish();
    dispatcher_.RecordCallSteps(prepare_, steps_);
  }

 private:
  ClaimDispatcher& dispatcher_;
  bool prepare_;
  RequestSteps steps_;
  ScopedSteps scope_;
};

template <typename Request, typename Response, bool kShareId>
grpc::Status Prepare(ClaimDispatcher& dispatcher, grpc::ServerContext* ctx, const Request& req, Response* resp) {
  CallSteps steps(dispatcher, true);
  auto results = dispatcher.Prepare(ClaimsOf(req), SteadyDeadline(*ctx));
  if (!results.ok()) return ToGrpc(results.status());
  TimedStep answer(RequestStep::kAnswer);
  auto& out = *resp->mutable_claims();
  for (auto& [uid, result] : *results) {
    auto& entry = out[uid];
    entry.set_error(ClaimError(result.status()));
    if (!result.ok()) continue;
    for (auto& d : NormalizeDevices(std::move(result).value(), kShareId)) {
      auto* pd = entry.add_devices();
      for (auto& r : d.requests) pd->add_request_names(std::move(r));
      pd->set_pool_name(d.pool);
      pd->set_device_name(d.device);
      for (auto& id : d.cdi_device_ids) pd->add_cdi_device_ids(std::move(id));
      if constexpr (kShareId) {
        if (!d.share_id.empty()) pd->set_share_id(d.share_id);
      }
    }
  }
  return grpc::Status::OK;
}

template <typename Request, typename Response>
grpc::Status Unprepare(ClaimDispatcher& dispatcher, grpc::ServerContext* ctx, const Request& req, Response* resp) {
  CallSteps steps(dispatcher, false);
  auto results = dispatcher.Unprepare(ClaimsOf(req), SteadyDeadline(*ctx));
  if (!results.ok()) return ToGrpc(results.status());
  TimedStep answer(RequestStep::kAnswer);
  auto& out = *resp->mutable_claims();
  for (auto& [uid, status] : *results) out[uid].set_error(ClaimError(status));
  return grpc::Status::OK;
}

}  // namespace

std::chrono::steady_clock::time_point SteadyDeadline(const grpc::ServerContext& ctx) {
  const auto remaining = ctx.deadline() - std::chrono::system_clock::now();
  // Calls without a deadline report a far-future one.
  if (remaining > std::chrono::hours(24)) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(remaining);
}

grpc::Status DraV1Service::NodePrepareResources(grpc::ServerContext* ctx,
                                                const drav1::NodePrepareResourcesRequest* req,
                                                drav1::NodePrepareResourcesResponse* resp) {
  NVDRA_VLOG(6, "v1 NodePrepareResources: {} claims", req->claims_size());
  return GuardedRpc("v1 NodePrepareResources", [&] {
    return Prepare<drav1::NodePrepareResourcesRequest, drav1::NodePrepareResourcesResponse, true>(dispatcher_, ctx,
                                                                                                 *req, resp);
  });
}

grpc::Status DraV1Service::NodeUnprepareResources(grpc::ServerContext* ctx,
                                                  const drav1::NodeUnprepareResourcesRequest* req,
                                                  drav1::NodeUnprepareResourcesResponse* resp) {
  NVDRA_VLOG(6, "v1 NodeUnprepareResources: {} claims", req->claims_size());
  return GuardedRpc("v1 NodeUnprepareResources",
                    [&] { return Unprepare(dispatcher_, ctx, *req, resp); });
}

grpc::Status DraV1beta1Service::NodePrepareResources(
    grpc::ServerContext* ctx, const drav1beta1::NodePrepareResourcesRequest* req,
    drav1beta1::NodePrepareResourcesResponse* resp) {
  NVDRA_VLOG(6, "v1beta1 NodePrepareResources: {} claims", req->claims_size());
  return GuardedRpc("v1beta1 NodePrepareResources", [&] {
    return Prepare<drav1beta1::NodePrepareResourcesRequest, drav1beta1::NodePrepareResourcesResponse, false>(
        dispatcher_, ctx, *req, resp);
  });
}

grpc::Status DraV1beta1Service::NodeUnprepareResources(
    grpc::ServerContext* ctx, const drav1beta1::NodeUnprepareResourcesRequest* req,
    drav1beta1::NodeUnprepareResourcesResponse* resp) {
  NVDRA_VLOG(6, "v1beta1 NodeUnprepareResources: {} claims", req->claims_size());
  return GuardedRpc("v1beta1 NodeUnprepareResources",
                    [&] { return Unprepare(dispatcher_, ctx, *req, resp); });
}

}  // namespace nvdra::kubelet
