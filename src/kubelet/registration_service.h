// The pluginregistration.Registration service on <driver>[-<id>]-reg.sock.
// The kubelet's plugin watcher calls GetInfo with a 1 s timeout and does not
// retry, so GetInfo answers from data fixed at construction and never waits
// on anything else in the process.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kubelet/proto/pluginregistration/api.grpc.pb.h"
#include "util/mutex.h"

namespace nvdra::kubelet {

// Short service names as the kubelet matches them in supported_versions.
inline constexpr const char* kDraV1Service = "v1.DRAPlugin";
inline constexpr const char* kDraV1beta1Service = "v1beta1.DRAPlugin";
inline constexpr const char* kHealthV1Service = "v1.DRAResourceHealth";
inline constexpr const char* kHealthV1alpha1Service = "v1alpha1.DRAResourceHealth";
inline constexpr const char* kDraPluginType = "DRAPlugin";

// The advertised services, most preferred first.
std::vector<std::string> SupportedVersions(bool health_streaming);

class RegistrationService final : public pluginregistration::Registration::CallbackService {
 public:
  struct Status {
    bool registered = false;
    std::string error;
  };

  RegistrationService(std::string driver_name, std::string dra_endpoint, std::vector<std::string> supported_versions);

  // Both answer at once, on the gRPC thread that took the call.
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx, const pluginregistration::InfoRequest* req,
                                    pluginregistration::PluginInfo* info) override;
  grpc::ServerUnaryReactor* NotifyRegistrationStatus(grpc::CallbackServerContext* ctx,
                                                     const pluginregistration::RegistrationStatus* status,
                                                     pluginregistration::RegistrationStatusResponse* resp) override;

  // The last status the kubelet sent, if any.
  std::optional<Status> LastStatus() const EXCLUDES(mu_);

 private:
  grpc::Status Notified(const pluginregistration::RegistrationStatus& status) EXCLUDES(mu_);

  const pluginregistration::PluginInfo info_;
  mutable Mutex mu_;
  std::optional<Status> last_ GUARDED_BY(mu_);
};

}  // namespace nvdra::kubelet
