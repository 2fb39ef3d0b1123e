// The DRAPlugin gRPC services the kubelet calls on dra.sock, in the two API
// versions a kubelet 1.32 to 1.36 may speak. Both map onto one
// ClaimDispatcher; they differ only in message types and in v1beta1 having
// no share_id. They are callback services: a call holds no thread while its
// claims run; the worker that finishes the last claim (or the call's
// deadline timer, or shutdown) answers it.
#pragma once

#include "kubelet/claim_dispatcher.h"
#include "kubelet/proto/dra/v1/api.grpc.pb.h"
#include "kubelet/proto/dra/v1beta1/api.grpc.pb.h"
#include "kubelet/timer_thread.h"

namespace nvdra::kubelet {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

class DraV1Service final : public drav1::DRAPlugin::CallbackService {
 public:
  // `timers` answers the calls whose claims are late (ClaimDispatcher::Expire).
  DraV1Service(ClaimDispatcher& dispatcher, TimerThread& timers) : dispatcher_(dispatcher), timers_(timers) {}
  grpc::ServerUnaryReactor* NodePrepareResources(grpc::CallbackServerContext* ctx,
                                                 const drav1::NodePrepareResourcesRequest* req,
                                                 drav1::NodePrepareResourcesResponse* resp) override;
  grpc::ServerUnaryReactor* NodeUnprepareResources(grpc::CallbackServerContext* ctx,
                                                   const drav1::NodeUnprepareResourcesRequest* req,
                                                   drav1::NodeUnprepareResourcesResponse* resp) override;

 private:
  ClaimDispatcher& dispatcher_;
  TimerThread& timers_;
};

class DraV1beta1Service final : public drav1beta1::DRAPlugin::CallbackService {
 public:
  DraV1beta1Service(ClaimDispatcher& dispatcher, TimerThread& timers) : dispatcher_(dispatcher), timers_(timers) {}
  grpc::ServerUnaryReactor* NodePrepareResources(grpc::CallbackServerContext* ctx,
                                                 const drav1beta1::NodePrepareResourcesRequest* req,
                                                 drav1beta1::NodePrepareResourcesResponse* resp) override;
  grpc::ServerUnaryReactor* NodeUnprepareResources(grpc::CallbackServerContext* ctx,
                                                   const drav1beta1::NodeUnprepareResourcesRequest* req,
                                                   drav1beta1::NodeUnprepareResourcesResponse* resp) override;

 private:
  ClaimDispatcher& dispatcher_;
  TimerThread& timers_;
};

// Converts a gRPC call deadline to the steady clock (max() when none).
std::chrono::steady_clock::time_point SteadyDeadline(const grpc::ServerContextBase& ctx);

}  // namespace nvdra::kubelet
