// The DRAResourceHealth streaming services (v1 and v1alpha1) on dra.sock.
// Served, and advertised in GetInfo, only when health streaming is enabled.
#pragma once

#include <atomic>

#include "kubelet/device_health_broadcaster.h"
#include "kubelet/proto/dra_health/v1/api.grpc.pb.h"
#include "kubelet/proto/dra_health/v1alpha1/api.grpc.pb.h"

namespace nvdra::kubelet {

class DeviceHealthV1Service final : public ::v1::DRAResourceHealth::Service {
 public:
  explicit DeviceHealthV1Service(DeviceHealthSource& source) : source_(source) {}
  grpc::Status NodeWatchResources(grpc::ServerContext* ctx, const ::v1::NodeWatchResourcesRequest* req,
                                  grpc::ServerWriter<::v1::NodeWatchResourcesResponse>* writer) override;
  // Ends open streams (they return OK) so a server can shut down promptly.
  void Stop() {
    stopping_ = true;
    source_.WakeWaiters();
  }

 private:
  DeviceHealthSource& source_;
  std::atomic<bool> stopping_{false};
};

class DeviceHealthV1alpha1Service final : public ::v1alpha1::DRAResourceHealth::Service {
 public:
  explicit DeviceHealthV1alpha1Service(DeviceHealthSource& source) : source_(source) {}
  grpc::Status NodeWatchResources(grpc::ServerContext* ctx, const ::v1alpha1::NodeWatchResourcesRequest* req,
                                  grpc::ServerWriter<::v1alpha1::NodeWatchResourcesResponse>* writer) override;
  void Stop() {
    stopping_ = true;
    source_.WakeWaiters();
  }

 private:
  DeviceHealthSource& source_;
  std::atomic<bool> stopping_{false};
};

}  // namespace nvdra::kubelet
