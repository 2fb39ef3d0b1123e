// `nvdractl probe`: the kubelet's gRPC liveness probe (grpc.health.v1
// Health/Check) against a plugin's --healthcheck-port, so an operator, and
// the end-to-end tests, can ask a running plugin what the kubelet asks it.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cmd/nvdractl/commands.h"
#include "kubelet/proto/grpc_health/v1/health.grpc.pb.h"

namespace nvdra::ctl {

namespace {

// gRPC reads "127.0.0.1" as port 0 without a word; the probe says what is
// missing instead.
std::string CheckHostPort(const std::string& address) {
  size_t colon = address.rfind(':');
  bool bracketed = !address.empty() && address[0] == '[';
  if (colon == std::string::npos || colon == 0 || (bracketed && address[colon - 1] != ']')) {
    return address + " has no port: give host:port, the port being the plugin's --healthcheck-port";
  }
  std::string port = address.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return "the port of " + address + " is not a number from 1 to 65535";
  }
  return "";
}

}  // namespace

void AddProbeCommand(CLI::App& app, int& exit_code) {
  struct ProbeArgs {
    std::string address;
    std::string service = "liveness";
    double timeout_s = 10;
  };
  auto args = std::make_shared<ProbeArgs>();
  auto* probe = app.add_subcommand(
      "probe", "Ask a plugin's liveness endpoint what the kubelet's gRPC probe asks (grpc.health.v1.Health/Check).\n"
               "Output: {\"address\", \"service\", \"status\": \"SERVING\"|\"NOT_SERVING\"|...} or {\"address\", "
               "\"service\", \"rpc_error\"}.\n"
               "Exit status: 0 SERVING; 1 any other status; 2 the call failed or the arguments are bad.");
  probe->add_option("--address", args->address, "host:port of the plugin's --healthcheck-port")
      ->required()
      ->check(CLI::Validator(CheckHostPort, "HOST:PORT"));
  probe->add_option("--service", args->service, "the service asked about (the Helm chart asks \"liveness\")");
  probe->add_option("--timeout", args->timeout_s, "seconds to wait for the answer (the chart's probes allow 10)")
      ->check(CLI::PositiveNumber);
  probe->callback([args, &exit_code] {
    auto stub = ::grpc::health::v1::Health::NewStub(grpc::CreateChannel(args->address,
                                                                        grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(args->timeout_s * 1000)));
    ::grpc::health::v1::HealthCheckRequest req;
    req.set_service(args->service);
    ::grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = stub->Check(&ctx, req, &resp);
    nlohmann::json out = {{"address", args->address}, {"service", args->service}};
    if (!s.ok()) {
      out["rpc_error"] = s.error_message().empty() ? std::to_string(s.error_code()) : s.error_message();
      std::cout << out.dump() << std::endl;
      exit_code = 2;
      return;
    }
    out["status"] = ::grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
    std::cout << out.dump() << std::endl;
    exit_code = resp.status() == ::grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
  });
}

}  // namespace nvdra::ctl
