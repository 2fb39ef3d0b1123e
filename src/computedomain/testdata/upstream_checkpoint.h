// Test data: a checkpoint.json as the Go driver writes it for a channel
// claim (allocationMode All) and a daemon claim of ComputeDomain cd-1.
#pragma once

#include <string>

#include "ledger/ledger_test_util.h"

namespace nvdra::computedomain::testing {

inline constexpr const char* kUpstreamChannelClaimUid = "7a4e1a8e-0000-4000-8000-0000000000c1";
inline constexpr const char* kUpstreamDaemonClaimUid = "7a4e1a8e-0000-4000-8000-0000000000d1";

// Channel and daemon claims as the Go driver checkpoints them.
inline std::string UpstreamCdCheckpoint() {
  auto config = [](const std::string& request, const std::string& kind, const std::string& extra) {
    return R"({"source":"FromClaim","requests":[")" + request +
           R"("],"opaque":{"driver":"compute-domain.nvidia.com","parameters":{"apiVersion":"resource.nvidia.com/v1beta1","kind":")" +
           kind + R"(","domainID":"cd-1")" + extra + "}}}";
  };
  auto claim = [&](const std::string& request, const std::string& device, const std::string& member,
                   const std::string& type, const std::string& cfg) {
    return R"({"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":")" +
           request + R"(","driver":"compute-domain.nvidia.com","pool":"node-a","device":")" + device +
           R"("}],"config":[)" + cfg + R"(]}}},"preparedDevices":[{"devices":[{)" + member +
           R"(}],"configState":{"Type":")" + type + R"(","ComputeDomain":"cd-1"}}]})";
  };
  std::string dev = R"({"Requests":["channel"],"PoolName":"node-a","DeviceName":"channel-0","CDIDeviceIDs":[]})";
  std::string daemon_dev = R"({"Requests":["daemon"],"PoolName":"node-a","DeviceName":"daemon-0","CDIDeviceIDs":[]})";
  return ledger::testing::GoCheckpointFile(
      "{\"" + std::string(kUpstreamChannelClaimUid) + "\":" +
          claim("channel", "channel-0", R"("channel":{"info":{"id":0},"device":)" + dev + R"(},"daemon":null)",
                "channel", config("channel", "ComputeDomainChannelConfig", R"(,"allocationMode":"All")")) +
          ",\"" + std::string(kUpstreamDaemonClaimUid) + "\":" +
          claim("daemon", "daemon-0", R"("channel":null,"daemon":{"info":{"id":0},"device":)" + daemon_dev + "}",
                "daemon", config("daemon", "ComputeDomainDaemonConfig", "")) +
          "}",
      "boot");
}

}  // namespace nvdra::computedomain::testing
