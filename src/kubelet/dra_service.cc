#include "kubelet/dra_service.h"

#include <memory>
#include <optional>
#include <string>

#include "kubelet/device_list.h"
#include "kubelet/grpc_barrier.h"
#include "util/log.h"
#include "util/mutex.h"

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

// Times one call (util/request_steps.h) across the threads it runs on (the
// gRPC thread that starts it, the one that answers it) and hands the record
// to the engine's metrics once the answer is built. Used by one thread at a
// time: the dispatcher's lock orders the start before the answer.
class CallSteps {
 public:
  CallSteps(ClaimDispatcher& dispatcher, bool prepare)
      : dispatcher_(dispatcher), prepare_(prepare), steps_(RequestStep::kRpcOther) {}
  void Dispatched() { steps_.Switch(RequestStep::kDispatch); }
  // The claims are answered: what the workers did themselves is theirs.
  void Answering(ClaimDispatcher::Clock::duration worked) {
    steps_.Switch(RequestStep::kAnswer);
    steps_.Exclude(RequestStep::kDispatch, worked);
  }
  void Finish() {
    steps_.Finish();
    dispatcher_.RecordCallSteps(prepare_, steps_);
  }

 private:
  ClaimDispatcher& dispatcher_;
  bool prepare_;
  RequestSteps steps_;
};

// Whichever of the call's answer and its deadline comes second does
// nothing: the answer cancels the timer, and a timer that fires first
// answers the claims still running (they go on in the background).
struct CallTimer {
  Mutex mu;
  bool answered GUARDED_BY(mu) = false;
  std::optional<TimerThread::Handle> handle GUARDED_BY(mu);
};

template <typename Results, typename Start, typename Fill>
grpc::ServerUnaryReactor* Serve(ClaimDispatcher& dispatcher, TimerThread& timers, grpc::CallbackServerContext* ctx,
                                bool prepare, std::string_view method, Start start, Fill fill) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto steps = std::make_shared<CallSteps>(dispatcher, prepare);
  auto timer = std::make_shared<CallTimer>();
  auto done = [reactor, steps, timer, &timers, fill = std::move(fill),
               method = std::string(method)](Result<Results> results, ClaimDispatcher::Clock::duration worked) mutable {
    std::optional<TimerThread::Handle> pending;
    {
      MutexLock lock(timer->mu);
      timer->answered = true;
      pending = timer->handle;
    }
    if (pending) timers.Cancel(*pending);
    steps->Answering(worked);
    grpc::Status status = results.ok() ? GuardedRpc(method, [&] { return fill(std::move(results).value()); })
                                       : ToGrpc(results.status());
    steps->Finish();
    reactor->Finish(status);
  };
  steps->Dispatched();
  Result<ClaimDispatcher::CallHandle> call = RunGuarded(method, [&]() -> Result<ClaimDispatcher::CallHandle> {
    return start(SteadyDeadline(*ctx), done);
  });
  if (!call.ok()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL, call.status().message()));
  } else if (*call) {
    MutexLock lock(timer->mu);
    if (!timer->answered) {
      timer->handle = timers.RunAt(
          ClaimDispatcher::Deadline(*call), [&dispatcher, handle = *call] { dispatcher.Expire(handle); }, &dispatcher);
    }
  }
  return reactor;
}

template <typename Request, typename Response, bool kShareId>
grpc::ServerUnaryReactor* Prepare(ClaimDispatcher& dispatcher, TimerThread& timers, grpc::CallbackServerContext* ctx,
                                  std::string_view method, const Request& req, Response* resp) {
  auto start = [&dispatcher, claims = ClaimsOf(req)](ClaimDispatcher::Clock::time_point deadline,
                                                     ClaimDispatcher::Done<ClaimDispatcher::PrepareResults> done) {
    return dispatcher.StartPrepare(claims, deadline, std::move(done));
  };
  auto fill = [resp](ClaimDispatcher::PrepareResults results) {
    auto& out = *resp->mutable_claims();
    for (auto& [uid, result] : results) {
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
  };
  return Serve<ClaimDispatcher::PrepareResults>(dispatcher, timers, ctx, true, method, std::move(start),
                                                std::move(fill));
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* Unprepare(ClaimDispatcher& dispatcher, TimerThread& timers, grpc::CallbackServerContext* ctx,
                                    std::string_view method, const Request& req, Response* resp) {
  auto start = [&dispatcher, claims = ClaimsOf(req)](ClaimDispatcher::Clock::time_point deadline,
                                                     ClaimDispatcher::Done<ClaimDispatcher::UnprepareResults> done) {
    return dispatcher.StartUnprepare(claims, deadline, std::move(done));
  };
  auto fill = [resp](ClaimDispatcher::UnprepareResults results) {
    auto& out = *resp->mutable_claims();
    for (auto& [uid, status] : results) out[uid].set_error(ClaimError(status));
    return grpc::Status::OK;
  };
  return Serve<ClaimDispatcher::UnprepareResults>(dispatcher, timers, ctx, false, method, std::move(start),
                                                  std::move(fill));
}

}  // namespace

std::chrono::steady_clock::time_point SteadyDeadline(const grpc::ServerContextBase& ctx) {
  const auto remaining = ctx.deadline() - std::chrono::system_clock::now();
  // Calls without a deadline report a far-future one.
  if (remaining > std::chrono::hours(24)) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(remaining);
}

grpc::ServerUnaryReactor* DraV1Service::NodePrepareResources(grpc::CallbackServerContext* ctx,
                                                             const drav1::NodePrepareResourcesRequest* req,
                                                             drav1::NodePrepareResourcesResponse* resp) {
  NVDRA_VLOG(6, "v1 NodePrepareResources: {} claims", req->claims_size());
  return Prepare<drav1::NodePrepareResourcesRequest, drav1::NodePrepareResourcesResponse, true>(
      dispatcher_, timers_, ctx, "v1 NodePrepareResources", *req, resp);
}

grpc::ServerUnaryReactor* DraV1Service::NodeUnprepareResources(grpc::CallbackServerContext* ctx,
                                                               const drav1::NodeUnprepareResourcesRequest* req,
                                                               drav1::NodeUnprepareResourcesResponse* resp) {
  NVDRA_VLOG(6, "v1 NodeUnprepareResources: {} claims", req->claims_size());
  return Unprepare(dispatcher_, timers_, ctx, "v1 NodeUnprepareResources", *req, resp);
}

grpc::ServerUnaryReactor* DraV1beta1Service::NodePrepareResources(grpc::CallbackServerContext* ctx,
                                                                  const drav1beta1::NodePrepareResourcesRequest* req,
                                                                  drav1beta1::NodePrepareResourcesResponse* resp) {
  NVDRA_VLOG(6, "v1beta1 NodePrepareResources: {} claims", req->claims_size());
  return Prepare<drav1beta1::NodePrepareResourcesRequest, drav1beta1::NodePrepareResourcesResponse, false>(
      dispatcher_, timers_, ctx, "v1beta1 NodePrepareResources", *req, resp);
}

grpc::ServerUnaryReactor* DraV1beta1Service::NodeUnprepareResources(
    grpc::CallbackServerContext* ctx, const drav1beta1::NodeUnprepareResourcesRequest* req,
    drav1beta1::NodeUnprepareResourcesResponse* resp) {
  NVDRA_VLOG(6, "v1beta1 NodeUnprepareResources: {} claims", req->claims_size());
  return Unprepare(dispatcher_, timers_, ctx, "v1beta1 NodeUnprepareResources", *req, resp);
}

}  // namespace nvdra::kubelet
