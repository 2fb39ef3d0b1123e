// Pins what the kubelet matches byte for byte: full service and method
// names, and field numbers of the messages it decodes. The messages use
// protobuf's lite runtime (no descriptors), so both are checked on the
// wire: a serialized message's tags, and calls by full method name to a
// real server over a Unix socket.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <set>

#include "kubelet/proto/dra/v1/api.grpc.pb.h"
#include "kubelet/proto/dra/v1beta1/api.grpc.pb.h"
#include "kubelet/proto/dra_health/v1/api.grpc.pb.h"
#include "kubelet/proto/dra_health/v1alpha1/api.grpc.pb.h"
#include "kubelet/proto/grpc_health/v1/health.grpc.pb.h"
#include "kubelet/proto/pluginregistration/api.grpc.pb.h"
#include "util/test_temp_dir.h"

namespace nvdra::kubelet {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
using google::protobuf::internal::WireFormatLite;

// The field numbers present in `m`'s encoding.
std::set<int> Tags(const google::protobuf::MessageLite& m) {
  std::string bytes = m.SerializeAsString();
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  std::set<int> out;
  while (uint32_t tag = in.ReadTag()) {
    out.insert(WireFormatLite::GetTagFieldNumber(tag));
    if (!WireFormatLite::SkipField(&in, tag)) break;
  }
  return out;
}

// Every method answers with this, so a call that reaches it is told apart
// from one to a name the server does not know (UNIMPLEMENTED).
grpc::Status Reached() { return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "reached"); }

struct DraV1 final : drav1::DRAPlugin::Service {
  grpc::Status NodePrepareResources(grpc::ServerContext*, const drav1::NodePrepareResourcesRequest*,
                                    drav1::NodePrepareResourcesResponse*) override {
    return Reached();
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const drav1::NodeUnprepareResourcesRequest*,
                                      drav1::NodeUnprepareResourcesResponse*) override {
    return Reached();
  }
};
struct DraV1beta1 final : drav1beta1::DRAPlugin::Service {
  grpc::Status NodePrepareResources(grpc::ServerContext*, const drav1beta1::NodePrepareResourcesRequest*,
                                    drav1beta1::NodePrepareResourcesResponse*) override {
    return Reached();
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const drav1beta1::NodeUnprepareResourcesRequest*,
                                      drav1beta1::NodeUnprepareResourcesResponse*) override {
    return Reached();
  }
};
struct Registration final : ::pluginregistration::Registration::Service {
  grpc::Status GetInfo(grpc::ServerContext*, const ::pluginregistration::InfoRequest*,
                       ::pluginregistration::PluginInfo*) override {
    return Reached();
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const ::pluginregistration::RegistrationStatus*,
                                        ::pluginregistration::RegistrationStatusResponse*) override {
    return Reached();
  }
};
struct HealthV1 final : ::v1::DRAResourceHealth::Service {
  grpc::Status NodeWatchResources(grpc::ServerContext*, const ::v1::NodeWatchResourcesRequest*,
                                  grpc::ServerWriter<::v1::NodeWatchResourcesResponse>*) override {
    return Reached();
  }
};
struct HealthV1alpha1 final : ::v1alpha1::DRAResourceHealth::Service {
  grpc::Status NodeWatchResources(grpc::ServerContext*, const ::v1alpha1::NodeWatchResourcesRequest*,
                                  grpc::ServerWriter<::v1alpha1::NodeWatchResourcesResponse>*) override {
    return Reached();
  }
};
struct Liveness final : ::grpc::health::v1::Health::Service {
  grpc::Status Check(grpc::ServerContext*, const ::grpc::health::v1::HealthCheckRequest*,
                     ::grpc::health::v1::HealthCheckResponse*) override {
    return Reached();
  }
};

// The status of a call to `method` (a full name) with an empty request.
grpc::StatusCode CallByName(grpc::GenericStub& stub, const std::string& method) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  grpc::ByteBuffer request, response;
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  return status.error_code();
}

TEST(ProtoWireTest, ServiceAndMethodNames) {
  nvdra::testing::TempDir dir;
  DraV1 v1;
  DraV1beta1 v1beta1;
  Registration registration;
  HealthV1 health_v1;
  HealthV1alpha1 health_v1alpha1;
  Liveness liveness;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + dir.path() + "/wire.sock", grpc::InsecureServerCredentials());
  for (grpc::Service* s :
       std::initializer_list<grpc::Service*>{&v1, &v1beta1, &registration, &health_v1, &health_v1alpha1, &liveness}) {
    builder.RegisterService(s);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  grpc::GenericStub stub(grpc::CreateChannel("unix:" + dir.path() + "/wire.sock", grpc::InsecureChannelCredentials()));
  for (const char* method :
       {"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
        "/pluginregistration.Registration/GetInfo", "/pluginregistration.Registration/NotifyRegistrationStatus",
        "/v1.DRAResourceHealth/NodeWatchResources", "/v1alpha1.DRAResourceHealth/NodeWatchResources",
        "/grpc.health.v1.Health/Check"}) {
    EXPECT_EQ(CallByName(stub, method), grpc::StatusCode::ALREADY_EXISTS) << method;
  }
  // A name the server does not serve is told apart from the ones above.
  EXPECT_EQ(CallByName(stub, "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepare"), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_STREQ(drav1::DRAPlugin::service_full_name(), "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin");
  server->Shutdown();
}

TEST(ProtoWireTest, FieldNumbers) {
  drav1::Device d;
  d.add_request_names("r");
  d.set_pool_name("p");
  d.set_device_name("d");
  d.add_cdi_device_ids("c");
  d.set_share_id("s");
  EXPECT_EQ(Tags(d), (std::set<int>{1, 2, 3, 4, 5}));
  drav1beta1::Device old;
  old.add_request_names("r");
  old.set_pool_name("p");
  old.set_device_name("d");
  old.add_cdi_device_ids("c");
  EXPECT_EQ(Tags(old), (std::set<int>{1, 2, 3, 4}));
  drav1::Claim claim;
  claim.set_namespace_("ns");
  EXPECT_EQ(Tags(claim), std::set<int>{1});
  claim.Clear();
  claim.set_uid("u");
  EXPECT_EQ(Tags(claim), std::set<int>{2});
  claim.Clear();
  claim.set_name("n");
  EXPECT_EQ(Tags(claim), std::set<int>{3});
  drav1::NodePrepareResourceResponse response;
  response.set_error("e");
  EXPECT_EQ(Tags(response), std::set<int>{2});
  ::pluginregistration::PluginInfo info;
  info.set_endpoint("e");
  info.add_supported_versions("v");
  EXPECT_EQ(Tags(info), (std::set<int>{3, 4}));
  ::v1::DeviceHealth h1;
  h1.set_last_updated_time(1);
  h1.set_health_check_timeout_seconds(2);
  h1.set_message("m");
  EXPECT_EQ(Tags(h1), (std::set<int>{3, 4, 5}));
  EXPECT_EQ(::v1::UNHEALTHY, 2);
}

}  // namespace
}  // namespace nvdra::kubelet
