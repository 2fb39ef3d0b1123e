// Pins what the kubelet matches byte for byte: full service and method
// names, and field numbers of the messages it decodes.
#include <gtest/gtest.h>

#include "kubelet/proto/dra/v1/api.grpc.pb.h"
#include "kubelet/proto/dra/v1beta1/api.grpc.pb.h"
#include "kubelet/proto/dra_health/v1/api.grpc.pb.h"
#include "kubelet/proto/dra_health/v1alpha1/api.grpc.pb.h"
#include "kubelet/proto/grpc_health/v1/health.grpc.pb.h"
#include "kubelet/proto/pluginregistration/api.grpc.pb.h"

namespace nvdra::kubelet {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;

std::vector<std::string> Methods(const std::string& service) {
  const auto* s = DescriptorPool::generated_pool()->FindServiceByName(service);
  std::vector<std::string> out;
  if (!s) return out;
  for (int i = 0; i < s->method_count(); ++i) out.push_back("/" + service + "/" + s->method(i)->name());
  return out;
}

int Field(const Descriptor* d, const std::string& name) {
  const auto* f = d->FindFieldByName(name);
  return f ? f->number() : -1;
}

TEST(ProtoWireTest, ServiceAndMethodNames) {
  EXPECT_EQ(Methods("k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"),
            std::vector<std::string>({"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
                                      "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"}));
  EXPECT_EQ(Methods("k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin").size(), 2u);
  EXPECT_EQ(Methods("pluginregistration.Registration"),
            std::vector<std::string>({"/pluginregistration.Registration/GetInfo",
                                      "/pluginregistration.Registration/NotifyRegistrationStatus"}));
  EXPECT_EQ(Methods("v1.DRAResourceHealth"),
            std::vector<std::string>({"/v1.DRAResourceHealth/NodeWatchResources"}));
  EXPECT_EQ(Methods("v1alpha1.DRAResourceHealth"),
            std::vector<std::string>({"/v1alpha1.DRAResourceHealth/NodeWatchResources"}));
  EXPECT_EQ(Methods("grpc.health.v1.Health")[0], "/grpc.health.v1.Health/Check");
  EXPECT_STREQ(::k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::service_full_name(),
               "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin");
}

TEST(ProtoWireTest, FieldNumbers) {
  const auto* v1 = ::k8s::io::kubelet::pkg::apis::dra::v1::Device::descriptor();
  EXPECT_EQ(Field(v1, "request_names"), 1);
  EXPECT_EQ(Field(v1, "pool_name"), 2);
  EXPECT_EQ(Field(v1, "device_name"), 3);
  EXPECT_EQ(Field(v1, "cdi_device_ids"), 4);
  EXPECT_EQ(Field(v1, "share_id"), 5);
  EXPECT_EQ(Field(::k8s::io::kubelet::pkg::apis::dra::v1beta1::Device::descriptor(), "share_id"), -1);
  const auto* claim = ::k8s::io::kubelet::pkg::apis::dra::v1::Claim::descriptor();
  EXPECT_EQ(Field(claim, "namespace"), 1);
  EXPECT_EQ(Field(claim, "uid"), 2);
  EXPECT_EQ(Field(claim, "name"), 3);
  EXPECT_EQ(Field(::k8s::io::kubelet::pkg::apis::dra::v1::NodePrepareResourceResponse::descriptor(), "error"), 2);
  const auto* info = ::pluginregistration::PluginInfo::descriptor();
  EXPECT_EQ(Field(info, "endpoint"), 3);
  EXPECT_EQ(Field(info, "supported_versions"), 4);
  const auto* h1 = ::v1::DeviceHealth::descriptor();
  EXPECT_EQ(Field(h1, "last_updated_time"), 3);
  EXPECT_EQ(Field(h1, "health_check_timeout_seconds"), 4);
  EXPECT_EQ(Field(h1, "message"), 5);
  EXPECT_EQ(Field(::v1alpha1::DeviceHealth::descriptor(), "message"), -1);
  EXPECT_EQ(::v1::UNHEALTHY, 2);
}

}  // namespace
}  // namespace nvdra::kubelet
