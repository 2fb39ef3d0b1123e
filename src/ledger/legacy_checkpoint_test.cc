#include "ledger/legacy_checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "ledger/claim_ledger.h"
#include "ledger/ledger_test_codec.h"
#include "ledger/ledger_test_util.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::ledger {
namespace {

std::string GoFile(const std::string& prepared_claims, const std::string& boot);
uint32_t GoChecksum(const std::string& json);

// The Go driver's v2 shape (upstream reference, "Top-level JSON shape").
constexpr const char* kGoClaims = R"({
  "7a4e1a8e-0000-4000-8000-000000000001":{"checkpointState":"PrepareCompleted",
    "status":{"allocation":{"devices":{"results":[
       {"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"},
       {"request":"nic","driver":"other.example.com","pool":"node-a","device":"nic-0"}],
       "config":[]}}},
    "preparedDevices":[{"devices":[{"gpu":{"info":{"uuid":"GPU-1"},"device":{"Requests":["gpu"],
       "PoolName":"node-a","DeviceName":"gpu-0",
       "CDIDeviceIDs":["k8s.gpu.nvidia.com/claim=7a4e1a8e-0000-4000-8000-000000000001-gpu-0"]}},
       "mig":null}],"configState":{"mpsControlDaemonID":""}}],
    "name":"c1","namespace":"default"},
  "7a4e1a8e-0000-4000-8000-000000000002":{"checkpointState":"PrepareStarted",
    "status":{"allocation":{"devices":{"results":[
       {"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-1"}]}}},
    "name":"c2","namespace":"team"}})";
const std::string kGoCheckpoint = GoFile(kGoClaims, "boot-old");

constexpr const char* kUid1 = "7a4e1a8e-0000-4000-8000-000000000001";
const testing::TestKindCodec kGpuCodec("gpu.nvidia.com");
const testing::TestKindCodec kChannelCodec("compute-domain.nvidia.com");
constexpr const char* kUid2 = "7a4e1a8e-0000-4000-8000-000000000002";

TEST(LegacyCheckpointTest, ParsesGoV2Checkpoint) {
  auto r = ParseLegacyCheckpoint(kGoCheckpoint, &kGpuCodec, "boot-now");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->entries.size(), 2u);
  const ClaimEntry& a = r->entries[0];
  EXPECT_EQ(a.uid, kUid1);
  EXPECT_EQ(a.state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(a.ns, "default");
  ASSERT_EQ(a.allocation.size(), 1u);  // the other driver's device is not ours
  EXPECT_EQ(a.held, std::vector<std::string>{"gpu-0"});
  ASSERT_EQ(a.prepared.size(), 1u);
  EXPECT_EQ(a.prepared[0].cdi_device_ids[0], std::string("k8s.gpu.nvidia.com/claim=") + kUid1 + "-gpu-0");
  EXPECT_EQ(a.undo["legacyCheckpoint"]["preparedDevices"][0]["devices"][0]["gpu"]["info"]["uuid"], "GPU-1");
  EXPECT_EQ(a.boot_id, "boot-old");
  EXPECT_EQ(r->entries[1].state, ClaimState::kPrepareStarted);
}

TEST(LegacyCheckpointTest, ParsesV1OnlyAndSnakeCaseDevices) {
  std::string v1 =
      R"({"preparedClaims":{"uid-1":[{"devices":[{"request_names":["r"],"pool_name":"p","device_name":"channel-0","cdi_device_ids":["x"]}]}]}})";
  std::string file = R"({"checksum":)" + std::to_string(GoChecksum(R"({"checksum":0,"v1":)" + v1 + "}")) + R"(,"v1":)" +
                     v1 + "}";
  auto r = ParseLegacyCheckpoint(file, &kChannelCodec, "boot-now");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries[0].state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(r->entries[0].prepared[0].device, "channel-0");
  EXPECT_EQ(r->entries[0].held, std::vector<std::string>{"channel 0"});  // as the codec names it
  EXPECT_EQ(r->entries[0].boot_id, "boot-now");
}

TEST(LegacyCheckpointTest, GarbageIsAnError) {
  EXPECT_EQ(ParseLegacyCheckpoint("{not json", nullptr, "b").status().code(), StatusCode::kDataLoss);
}

TEST(LegacyCheckpointTest, LedgerImportsOnceAndRetiresTheFile) {
  testing::ScratchDir dir;
  std::string cp = JoinPath(dir.path(), kLegacyCheckpointFileName);
  ASSERT_TRUE(WriteFileAtomically(cp, kGoCheckpoint).ok());
  LedgerOptions o;
  o.dir = dir.path();
  o.boot_id = "boot-old";
  o.codec = &kGpuCodec;
  {
    auto l = std::move(ClaimLedger::Open(o)).value();
    EXPECT_EQ(l->report().imported_legacy_claims, 2u);
    auto b = l->BeginPrepare(
        {kUid1, "default", "c1", {{"gpu", "gpu.nvidia.com", "node-a", "gpu-0", false, ""}}, std::nullopt, nullptr, {}});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(b->outcome, BeginOutcome::kAlreadyPrepared);
    // The imported holds are enforced.
    auto c = l->BeginPrepare(testing::Request("new-claim", {"gpu-1"}));
    EXPECT_EQ(c.status().message(),
              std::string("gpu-1 already allocated by claim ") + kUid2 + " (according to checkpoint)");
    // Unprepare works from the imported entry alone.
    auto u = l->BeginUnprepare(kUid1);
    ASSERT_TRUE(u.ok() && u->has_value());
    ASSERT_TRUE(l->FinishUnprepare(kUid1).ok());
  }
  EXPECT_FALSE(PathExists(cp));
  ASSERT_TRUE(WriteFileAtomically(cp, kGoCheckpoint).ok());  // e.g. a Go plugin that was still around
  auto l = std::move(ClaimLedger::Open(o)).value();
  EXPECT_EQ(l->report().imported_legacy_claims, 0u);  // the ledger is the truth now
  EXPECT_EQ((*l->Get(kUid1))->state, ClaimState::kTombstone);
}

// --- Upgrades from the Go driver: checksums, locks, boots, channels, retiring.

// The Go driver's checksum, computed independently of the import code: FNV-1a
// 32 over "([]uint8)[" + the decimal bytes joined by spaces + "]".
uint32_t GoChecksum(const std::string& json) {
  std::string dump = "([]uint8)[";
  for (size_t i = 0; i < json.size(); ++i) {
    if (i > 0) dump += ' ';
    dump += std::to_string(static_cast<unsigned>(static_cast<unsigned char>(json[i])));
  }
  dump += ']';
  uint32_t h = 2166136261u;
  for (unsigned char c : dump) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

TEST(LegacyCheckpointTest, IndependentChecksumMatchesTheReferenceValues) {
  EXPECT_EQ(GoChecksum(R"({"checksum":0,"v1":{}})"), 1083090442u);
  EXPECT_EQ(GoChecksum(R"({"checksum":0,"nodeBootID":"0f1e2d3c-aaaa-bbbb-cccc-111122223333"})"), 2836396369u);
}

// A checkpoint as the Go driver writes it: compact, checksums set.
std::string GoFile(const std::string& prepared_claims, const std::string& boot) {
  std::string v2 = R"({"checksum":0,"preparedClaims":)" + prepared_claims + R"(,"nodeBootID":")" + boot + "\"}";
  std::string v2sum = std::to_string(GoChecksum(v2));
  v2.replace(v2.find(":0,") + 1, 1, v2sum);
  return R"({"checksum":)" + std::to_string(GoChecksum(R"({"checksum":0,"v1":{}})")) + R"(,"v1":{},"v2":)" + v2 + "}";
}

constexpr const char* kCdUid = "7a4e1a8e-0000-4000-8000-0000000000c1";

std::string ChannelClaim(const std::string& uid, const std::string& mode) {
  return "\"" + uid +
         R"(":{"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":"channel","driver":"compute-domain.nvidia.com","pool":"node-a","device":"channel-0"}],"config":[{"source":"FromClaim","requests":["channel"],"opaque":{"driver":"compute-domain.nvidia.com","parameters":{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":"cd-1","allocationMode":")" +
         mode +
         R"("}}}]}}},"preparedDevices":[{"devices":[{"channel":{"info":{"id":0},"device":{"Requests":["channel"],"PoolName":"node-a","DeviceName":"channel-0","CDIDeviceIDs":["k8s.compute-domain.nvidia.com/claim=)" +
         uid +
         R"(-channel-0"]}},"daemon":null}],"configState":{"Type":"channel","ComputeDomain":"cd-1"}}],"name":"ch","namespace":"team"})";
}

class LegacyImportTest : public ::testing::Test {
 protected:
  LedgerOptions Options(const KindCodec* codec = &kGpuCodec) {
    LedgerOptions o;
    o.dir = dir_.path();
    o.boot_id = "boot-now";
    o.codec = codec;
    o.lock_timeout = std::chrono::milliseconds(300);
    return o;
  }
  std::string Cp() const { return JoinPath(dir_.path(), kLegacyCheckpointFileName); }
  void WriteCp(const std::string& text) { ASSERT_TRUE(WriteFileAtomically(Cp(), text).ok()); }

  nvdra::testing::TempDir dir_{"nvdra-legacy"};
};

TEST_F(LegacyImportTest, ImportedChannelClaimHoldsItsChannelLikeANativeOne) {
  WriteCp(GoFile("{" + ChannelClaim(kCdUid, "Single") + "}", "boot-now"));
  auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
  ASSERT_EQ(l->report().imported_legacy_claims, 1u) << l->report().Summary();
  auto r = testing::Request("native", {"channel-0"});
  r.held = std::vector<std::string>{"channel 0"};  // what the compute-domain kind holds
  auto b = l->BeginPrepare(r);
  EXPECT_EQ(b.status().code(), StatusCode::kConflict) << b.status().ToString();
  auto other = testing::Request("native2", {"channel-1"});
  other.held = std::vector<std::string>{"channel 1"};
  EXPECT_TRUE(l->BeginPrepare(other).ok());
}

TEST_F(LegacyImportTest, ImportedAllChannelsClaimHoldsEveryChannel) {
  WriteCp(GoFile("{" + ChannelClaim(kCdUid, "All") + "}", "boot-now"));
  auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
  ASSERT_EQ(l->report().imported_legacy_claims, 1u) << l->report().Summary();
  for (int ch : {1, 7, 2047}) {
    auto r = testing::Request("native-" + std::to_string(ch), {"channel-" + std::to_string(ch)});
    r.held = std::vector<std::string>{"channel " + std::to_string(ch)};
    EXPECT_EQ(l->BeginPrepare(r).status().code(), StatusCode::kConflict) << ch;
  }
}

TEST_F(LegacyImportTest, ABadChecksumIsNotImportedSilently) {
  std::string good = GoFile("{" + ChannelClaim(kCdUid, "Single") + "}", "boot-now");
  std::string bad = good;
  bad.replace(bad.find("\"ch\""), 4, "\"cx\"");  // a changed byte the checksum covers
  WriteCp(bad);
  auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
  OpenReport r = l->report();
  EXPECT_EQ(r.imported_legacy_claims, 0u);
  EXPECT_FALSE(r.clean());
  EXPECT_NE(r.Summary().find("checksum"), std::string::npos) << r.Summary();
  // The plugin must not treat the node as empty: it keeps CDI specs.
  EXPECT_TRUE(r.claims_may_be_missing);
  EXPECT_EQ(*ReadFileToString(Cp()), bad);  // left for the operator
}

// A UID twice in preparedClaims (first with channel 0, then channel 1), the
// checksums right: the Go driver never writes that, and a reader keeps one
// or the other, so the file is refused as corrupt (claims may be missing;
// the CDI specs decide) instead of being imported one way and exported the
// other.
TEST_F(LegacyImportTest, AClaimTwiceInTheCheckpointIsRefusedAsCorrupt) {
  std::string second = ChannelClaim(kCdUid, "Single");
  for (size_t at = second.find("channel-0"); at != std::string::npos; at = second.find("channel-0", at)) {
    second.replace(at, 9, "channel-1");
  }
  second.replace(second.find("\"id\":0"), 6, "\"id\":1");
  WriteCp(GoFile("{" + ChannelClaim(kCdUid, "Single") + "," + second + "}", "boot-now"));
  auto parsed = ParseLegacyCheckpoint(*ReadFileToString(Cp()), &kChannelCodec, "boot-now");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(parsed.status().message().find("claim " + std::string(kCdUid) + " appears more than once"),
            std::string::npos)
      << parsed.status().message();
  auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
  OpenReport r = l->report();
  EXPECT_EQ(r.imported_legacy_claims, 0u);
  EXPECT_TRUE(r.claims_may_be_missing);
  auto listed = l->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

// 3,000 claims of one GPU in a crafted checkpoint: each is kept as a holder
// of it (none is trusted to have let go), and what the ledger says about
// them stays a line per claim, not a list of every earlier holder each.
TEST_F(LegacyImportTest, ThousandsOfClaimsOfOneGpuImportWithoutQuadraticCost) {
  std::string claims;
  for (int i = 0; i < 3000; ++i) {
    char uid[40];
    std::snprintf(uid, sizeof uid, "5c1a0000-0000-4000-8000-%012d", i);
    claims +=
        std::string(i ? "," : "") + "\"" + uid +
        R"(":{"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"}]}}},"name":"c","namespace":"default"})";
  }
  WriteCp(testing::GoCheckpointFile("{" + claims + "}", "boot-now"));
  LedgerOptions o = Options(nullptr);
  {
    auto imported = std::move(ClaimLedger::Open(o)).value();
    EXPECT_EQ(imported->report().imported_legacy_claims, 3000u);
  }
  // The next start reads them back from the ledger and reports each.
  auto l = std::move(ClaimLedger::Open(o)).value();
  OpenReport r = l->report();
  auto holders = l->HoldersOf("gpu-0");
  ASSERT_TRUE(holders.ok());
  EXPECT_EQ(holders->size(), 3000u);
  ASSERT_EQ(r.double_holds.size(), 2999u);
  size_t said = 0;
  for (const auto& d : r.double_holds) said += d.size();
  for (const auto& e : r.errors) said += e.size();
  EXPECT_LT(said, 1u << 20) << "the report grows with the square of the holders";
  EXPECT_NE(r.double_holds.back().find("and 2998 more"), std::string::npos) << r.double_holds.back();
}

// A checkpoint.json past the size nvdra imports, or a FIFO or device planted
// at its name, is refused at once (never read, never waited on): the claims
// are missing, so every CDI spec is kept for the rebuild.
TEST_F(LegacyImportTest, AnOversizedOrNonRegularCheckpointIsRefusedWithoutReadingIt) {
  ASSERT_TRUE(WriteFileAtomically(Cp(), "{}").ok());
  ASSERT_EQ(::truncate(Cp().c_str(), static_cast<off_t>(kMaxLegacyCheckpointBytes + 1)), 0);
  {
    auto l = std::move(ClaimLedger::Open(Options())).value();
    OpenReport r = l->report();
    EXPECT_TRUE(r.claims_may_be_missing);
    EXPECT_NE(r.Summary().find("over the 64 MiB nvdra imports"), std::string::npos) << r.Summary();
  }
  testing::ScratchDir fifo_dir;
  ASSERT_EQ(::mkfifo(JoinPath(fifo_dir.path(), kLegacyCheckpointFileName).c_str(), 0644), 0);
  LedgerOptions o = Options();
  o.dir = fifo_dir.path();
  auto l = ClaimLedger::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_TRUE((*l)->report().claims_may_be_missing);
  EXPECT_NE((*l)->report().Summary().find("not a regular file"), std::string::npos) << (*l)->report().Summary();
}

TEST_F(LegacyImportTest, AValidChecksumIsImported) {
  WriteCp(GoFile("{" + ChannelClaim(kCdUid, "Single") + "}", "boot-now"));
  auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
  EXPECT_EQ(l->report().imported_legacy_claims, 1u);
  EXPECT_TRUE(l->report().clean()) << l->report().Summary();
}

TEST_F(LegacyImportTest, ImportWaitsForTheGoPluginsPrepareLock) {
  WriteCp(GoFile("{" + ChannelClaim(kCdUid, "Single") + "}", "boot-now"));
  int fd = ::open(JoinPath(dir_.path(), "pu.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto held = ClaimLedger::Open(Options(&kChannelCodec));
  EXPECT_FALSE(held.ok());
  EXPECT_NE(held.status().message().find("pu.lock"), std::string::npos) << held.status().ToString();
  EXPECT_FALSE(PathExists(JoinPath(dir_.path(), kLogFileName)));
  ::close(fd);
  auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
  EXPECT_EQ(l->report().imported_legacy_claims, 1u);
}

TEST_F(LegacyImportTest, ImportRetiresTheCheckpointSoALostLedgerCannotResurrectClaims) {
  std::string text = GoFile("{" + ChannelClaim(kCdUid, "Single") + "}", "boot-now");
  WriteCp(text);
  {
    auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
    EXPECT_EQ(l->report().imported_legacy_claims, 1u);
  }
  EXPECT_FALSE(PathExists(Cp()));
  // Still readable for a rollback, under another name the Go driver ignores.
  std::string retired;
  auto names = ListDirectory(dir_.path());
  for (const auto& n : *names) {
    if (n.starts_with(std::string(kLegacyCheckpointFileName) + ".")) retired = n;
  }
  ASSERT_FALSE(retired.empty());
  EXPECT_EQ(*ReadFileToString(JoinPath(dir_.path(), retired)), text);
  ASSERT_TRUE(RemoveFileIfExists(JoinPath(dir_.path(), kLogFileName)).ok());
  auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
  EXPECT_EQ(l->report().imported_legacy_claims, 0u);
  EXPECT_TRUE(l->List()->empty());
}

TEST_F(LegacyImportTest, ACheckpointFromAnotherBootBelongsToThatBoot) {
  WriteCp(GoFile("{" + ChannelClaim(kCdUid, "Single") + "}", "boot-old"));
  auto l = std::move(ClaimLedger::Open(Options(&kChannelCodec))).value();
  EXPECT_EQ(l->report().earlier_boot_claims, 1u);
  auto e = **l->Get(kCdUid);
  EXPECT_TRUE(e.from_earlier_boot);
  EXPECT_EQ(e.boot_id, "boot-old");
}

TEST_F(LegacyImportTest, ImportedClaimWithoutANameTakesItFromTheFirstPrepare) {
  // v25.3 files: v1 only, no names.
  std::string v1 =
      std::string(R"({"preparedClaims":{")") + kUid1 +
      R"(":{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"}]}}},"preparedDevices":[{"devices":[{"gpu":{"info":{"uuid":"GPU-1"},"device":{"Requests":["gpu"],"PoolName":"node-a","DeviceName":"gpu-0","CDIDeviceIDs":["x"]}},"mig":null}],"configState":{"mpsControlDaemonID":""}}]}}})";
  std::string body = R"({"checksum":0,"v1":)" + v1 + "}";
  WriteCp(R"({"checksum":)" + std::to_string(GoChecksum(body)) + R"(,"v1":)" + v1 + "}");
  auto l = std::move(ClaimLedger::Open(Options())).value();
  ASSERT_EQ(l->report().imported_legacy_claims, 1u) << l->report().Summary();
  EXPECT_EQ((**l->Get(kUid1)).name, "");
  // The engine answers a completed claim from Get; it hands the name over.
  ASSERT_TRUE(l->AdoptName(kUid1, "default", "c1").ok());
  EXPECT_EQ((**l->Get(kUid1)).name, "c1");
  EXPECT_EQ((**l->Get(kUid1)).ns, "default");
  // A recorded name is never replaced.
  ASSERT_TRUE(l->AdoptName(kUid1, "other", "c2").ok());
  EXPECT_EQ((**l->Get(kUid1)).name, "c1");
}

TEST_F(LegacyImportTest, BeginPrepareAlsoRecordsTheMissingName) {
  std::string v1 =
      std::string(R"({"preparedClaims":{")") + kUid1 +
      R"(":{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"}]}}}}}})";
  std::string body = R"({"checksum":0,"v1":)" + v1 + "}";
  WriteCp(R"({"checksum":)" + std::to_string(GoChecksum(body)) + R"(,"v1":)" + v1 + "}");
  auto l = std::move(ClaimLedger::Open(Options())).value();
  auto b = l->BeginPrepare(
      {kUid1, "default", "c1", {{"gpu", "gpu.nvidia.com", "node-a", "gpu-0", false, ""}}, std::nullopt, nullptr, {}});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((**l->Get(kUid1)).name, "c1");
}

}  // namespace
}  // namespace nvdra::ledger
