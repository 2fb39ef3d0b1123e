#include "kubelet/device_health_service.h"

#include "kubelet/grpc_barrier.h"
#include "util/log.h"

namespace nvdra::kubelet {
namespace {

// How often a stream with nothing to send checks whether its client left;
// the source wakes it at once for real changes and when the server stops.
constexpr auto kCancelCheckPeriod = std::chrono::milliseconds(200);

template <typename Response, bool kV1>
grpc::Status Stream(DeviceHealthSource& source, const std::atomic<bool>& stopping, grpc::ServerContext* ctx,
                    grpc::ServerWriter<Response>* writer) {
  uint64_t seen = 0;
  while (!ctx->IsCancelled() && !stopping && !source.Closed()) {
    auto snap = source.WaitForChange(seen, std::chrono::steady_clock::now() + kCancelCheckPeriod);
    if (!snap) continue;
    seen = snap->version;
    Response resp;
    for (const auto& d : snap->devices) {
      auto* out = resp.add_devices();
      out->mutable_device()->set_pool_name(d.pool);
      out->mutable_device()->set_device_name(d.device);
      out->set_health(static_cast<decltype(out->health())>(d.health));
      out->set_last_updated_time(d.last_updated_unix);
      if constexpr (kV1) {
        out->set_health_check_timeout_seconds(d.health_check_timeout_seconds);
        out->set_message(d.message);
      }
    }
    if (!writer->Write(resp)) break;  // the client went away
    NVDRA_VLOG(6, "sent device health for {} devices", snap->devices.size());
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::Status DeviceHealthV1Service::NodeWatchResources(grpc::ServerContext* ctx, const ::v1::NodeWatchResourcesRequest*,
                                                       grpc::ServerWriter<::v1::NodeWatchResourcesResponse>* writer) {
  return GuardedRpc("v1 NodeWatchResources",
                    [&] { return Stream<::v1::NodeWatchResourcesResponse, true>(source_, stopping_, ctx, writer); });
}

grpc::Status DeviceHealthV1alpha1Service::NodeWatchResources(
    grpc::ServerContext* ctx, const ::v1alpha1::NodeWatchResourcesRequest*,
    grpc::ServerWriter<::v1alpha1::NodeWatchResourcesResponse>* writer) {
  return GuardedRpc("v1alpha1 NodeWatchResources", [&] {
    return Stream<::v1alpha1::NodeWatchResourcesResponse, false>(source_, stopping_, ctx, writer);
  });
}

}  // namespace nvdra::kubelet
