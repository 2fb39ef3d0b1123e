#include "kubelet/registration_service.h"

#include "kubelet/grpc_barrier.h"
#include "util/log.h"

namespace nvdra::kubelet {
namespace {

pluginregistration::PluginInfo MakeInfo(std::string driver, std::string endpoint, std::vector<std::string> versions) {
  pluginregistration::PluginInfo info;
  info.set_type(kDraPluginType);
  info.set_name(std::move(driver));
  info.set_endpoint(std::move(endpoint));
  for (auto& v : versions) info.add_supported_versions(std::move(v));
  return info;
}

}  // namespace

std::vector<std::string> SupportedVersions(bool health_streaming) {
  // The kubelet takes the first DRAPlugin version it supports, and prefers
  // v1 health over v1alpha1 when both are listed.
  std::vector<std::string> v{kDraV1Service, kDraV1beta1Service};
  if (health_streaming) {
    v.push_back(kHealthV1Service);
    v.push_back(kHealthV1alpha1Service);
  }
  return v;
}

RegistrationService::RegistrationService(std::string driver_name, std::string dra_endpoint,
                                         std::vector<std::string> supported_versions)
    : info_(MakeInfo(std::move(driver_name), std::move(dra_endpoint), std::move(supported_versions))) {}

grpc::ServerUnaryReactor* RegistrationService::GetInfo(grpc::CallbackServerContext* ctx,
                                                       const pluginregistration::InfoRequest*,
                                                       pluginregistration::PluginInfo* info) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(GuardedRpc("registration GetInfo", [&] {
    NVDRA_VLOG(6, "registration GetInfo for {}", info_.name());
    *info = info_;
    return grpc::Status::OK;
  }));
  return reactor;
}

grpc::ServerUnaryReactor* RegistrationService::NotifyRegistrationStatus(
    grpc::CallbackServerContext* ctx, const pluginregistration::RegistrationStatus* status,
    pluginregistration::RegistrationStatusResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(Notified(*status));
  return reactor;
}

grpc::Status RegistrationService::Notified(const pluginregistration::RegistrationStatus& st) {
  const auto* status = &st;
  return GuardedRpc("registration NotifyRegistrationStatus", [&] {
    {
      MutexLock lock(mu_);
      last_ = Status{status->plugin_registered(), status->error()};
    }
    if (!status->plugin_registered()) {
      NVDRA_ERROR("kubelet rejected the registration of DRA driver {}: {}", info_.name(), status->error());
      return grpc::Status(grpc::StatusCode::UNKNOWN, "failed registration process: " + status->error());
    }
    NVDRA_VLOG(1, "registered DRA driver {} with the kubelet (endpoint {})", info_.name(), info_.endpoint());
    return grpc::Status::OK;
  });
}

std::optional<RegistrationService::Status> RegistrationService::LastStatus() const {
  MutexLock lock(mu_);
  return last_;
}

}  // namespace nvdra::kubelet
