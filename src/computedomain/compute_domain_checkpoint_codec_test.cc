#include "computedomain/compute_domain_checkpoint_codec.h"

#include <gtest/gtest.h>

#include "ledger/legacy_checkpoint.h"

namespace nvdra::computedomain {
namespace {

TEST(ComputeDomainCheckpointCodecTest, ChannelsAreHeldPerIdOrAllOfThem) {
  ComputeDomainCheckpointCodec codec;
  EXPECT_EQ(codec.driver_name(), "compute-domain.nvidia.com");
  EXPECT_EQ(codec.HeldResources("channel-7", {}), std::vector<std::string>{"channel 7"});
  EXPECT_EQ(codec.HeldResources("daemon-0", {}), std::vector<std::string>{"daemon-0"});
  nlohmann::json all = {{"kind", "ComputeDomainChannelConfig"}, {"allocationMode", "All"}};
  nlohmann::json single = {{"kind", "ComputeDomainChannelConfig"}, {"allocationMode", "Single"}};
  EXPECT_EQ(codec.HeldResources("channel-0", {all}).size(), 2048u);
  EXPECT_EQ(codec.HeldResources("channel-0", {all, single}), std::vector<std::string>{"channel 0"});  // later wins
  EXPECT_EQ(ledger::HeldByDevices(&codec, {"channel-3", "daemon-0"}),
            (std::vector<std::string>{"channel 3", "daemon-0"}));
}

TEST(ComputeDomainCheckpointCodecTest, ExportsChannelAndDaemonGroupsWithTheirDomain) {
  ComputeDomainCheckpointCodec codec;
  ledger::ClaimEntry e;
  e.uid = "7a4e1a8e-0000-4000-8000-0000000000c1";
  e.state = ledger::ClaimState::kPrepareCompleted;
  e.allocation = {{"channel", "compute-domain.nvidia.com", "node-a", "channel-0", false, ""}};
  e.prepared = {{{"channel"}, "node-a", "channel-0", {"k8s.compute-domain.nvidia.com/claim=x-channel-0"}, ""}};
  e.undo = {{"domainID", "cd-1"}};
  EXPECT_EQ(codec.UpstreamConfigs(e),
            R"({"source":"FromClaim","requests":["channel"],"opaque":{"driver":"compute-domain.nvidia.com",)"
            R"("parameters":{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig",)"
            R"("domainID":"cd-1","allocationMode":"Single"}}})");
  EXPECT_EQ(*codec.UpstreamPreparedDevices(e),
            R"([{"devices":[{"channel":{"info":{"id":0},"device":{"Requests":["channel"],"PoolName":"node-a",)"
            R"("DeviceName":"channel-0","CDIDeviceIDs":["k8s.compute-domain.nvidia.com/claim=x-channel-0"]}},)"
            R"("daemon":null}],"configState":{"Type":"channel","ComputeDomain":"cd-1"}}])");
  // What the export writes, the import reads back with the same holds.
  std::string file = ledger::WriteLegacyCheckpoint({e}, "boot", &codec);
  auto back = ledger::ParseLegacyCheckpoint(file, &codec, "boot");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->entries.size(), 1u);
  EXPECT_EQ(back->entries[0].held, std::vector<std::string>{"channel 0"});
  EXPECT_EQ(back->entries[0].prepared, e.prepared);
}

}  // namespace
}  // namespace nvdra::computedomain
