#include "computedomain/compute_domain_checkpoint_codec.h"

#include <gtest/gtest.h>

#include "computedomain/compute_domain_undo.h"
#include "computedomain/testdata/upstream_checkpoint.h"
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

// Upstream's two sentences: the checkpoint check's for channel ids, the
// overlap check's for a requested device held by another claim.
TEST(ComputeDomainCheckpointCodecTest, RefusalsUseUpstreamsWordsForEachCheck) {
  ComputeDomainCheckpointCodec codec;
  EXPECT_EQ(codec.HeldByAnotherClaim("channel 5", "uid-a", {"channel-5"}),
            "channel 5 already allocated by claim uid-a (according to checkpoint)");
  EXPECT_EQ(codec.HeldByAnotherClaim("daemon-0", "uid-a", {"daemon-0"}),
            "requested device daemon-0 is already allocated to different claim uid-a");
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

TEST(ComputeDomainCheckpointCodecTest, ImportTranslatesUpstreamClaimsIntoTheKindsUndoRecord) {
  ComputeDomainCheckpointCodec codec;
  auto imported = ledger::ParseLegacyCheckpoint(testing::UpstreamCdCheckpoint(), &codec, "boot");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ASSERT_EQ(imported->entries.size(), 2u);
  const auto& channel = imported->entries[0];
  auto undo = DecodeComputeDomainUndo(channel.undo);
  ASSERT_TRUE(undo.ok()) << undo.status().ToString();
  EXPECT_EQ(undo->domain_id, "cd-1");
  EXPECT_EQ(undo->channels, (std::vector<ChannelUndo>{{"channel-0", 0, nlohmann::json::object()}}));
  EXPECT_TRUE(undo->all_channels);
  EXPECT_FALSE(undo->daemon);
  EXPECT_EQ(channel.held.size(), 2048u);
  // What the Go driver wrote stays, for an export.
  EXPECT_TRUE(undo->unknown.contains("legacyCheckpoint"));
  EXPECT_TRUE(undo->unknown.contains("legacyCheckpointJson"));
  auto daemon = DecodeComputeDomainUndo(imported->entries[1].undo);
  ASSERT_TRUE(daemon.ok());
  EXPECT_EQ(daemon->domain_id, "cd-1");
  EXPECT_TRUE(daemon->daemon);
  EXPECT_TRUE(daemon->channels.empty());
  // The export gives the Go driver's claims back byte for byte.
  std::string back = ledger::WriteLegacyCheckpoint(imported->entries, "boot", &codec);
  EXPECT_EQ(nlohmann::ordered_json::parse(back)["v2"],
            nlohmann::ordered_json::parse(testing::UpstreamCdCheckpoint())["v2"]);
}

}  // namespace
}  // namespace nvdra::computedomain
