// The ledger under file-system faults and hostile or damaged input: a full
// disk during compaction, things planted at the temp and lock paths, an empty
// or foreign ledger.log, logs that record one device for two live claims, and
// entries in states a newer version wrote.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include "util/log.h"

#include "ledger/claim_ledger.h"
#include "ledger/fault_injection_env.h"
#include "ledger/ledger_inspector.h"
#include "ledger/ledger_test_util.h"
#include "ledger/log_format.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::ledger {
namespace {

using namespace std::chrono_literals;
using testing::Prepared;
using testing::Request;

class LedgerFaultsTest : public ::testing::Test {
 protected:
  LedgerOptions Options() {
    LedgerOptions o;
    o.dir = dir_.path();
    o.boot_id = "boot-1";
    o.clock = &clock_;
    o.tombstone_ttl = 60s;
    o.lock_timeout = 2s;
    return o;
  }
  std::unique_ptr<ClaimLedger> Open(LedgerOptions o) {
    auto l = ClaimLedger::Open(o);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? std::move(l).value() : nullptr;
  }
  std::string Path(const std::string& name) const { return JoinPath(dir_.path(), name); }
  std::string LogPath() const { return Path(kLogFileName); }
  std::string TmpPath() const { return LogPath() + ".tmp"; }
  void PrepareFully(ClaimLedger& l, const std::string& uid, const std::vector<std::string>& devs) {
    auto b = l.BeginPrepare(Request(uid, devs));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_TRUE(l.CompletePrepare(uid, Prepared(uid, devs), nullptr).ok());
  }
  // Appends one entry record to the log as another (newer, or buggy) writer would.
  void AppendEntry(const nlohmann::json& j) {
    auto bytes = ReadFileToString(LogPath());
    ASSERT_TRUE(bytes.ok());
    ASSERT_TRUE(WriteFileAtomically(LogPath(), *bytes + EncodeRecord(2, j.dump())).ok());
  }
  std::vector<std::string> SideFiles(const std::string& kind) {
    std::vector<std::string> out;
    auto names = ListDirectory(dir_.path());
    for (const auto& n : *names) {
      if (n.starts_with(std::string(kLogFileName) + "." + kind)) out.push_back(n);
    }
    return out;
  }

  nvdra::testing::TempDir dir_{"nvdra-ledger"};
  FakeClock clock_;
};

// Item: a failed compaction never fails a transition that is already durable.
TEST_F(LedgerFaultsTest, FullDiskDuringCompactionNeverFailsADurableTransition) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  o.compaction_ratio = 0;
  o.compaction_min_bytes = 0;  // every transition wants to compact
  auto l = Open(o);
  ASSERT_NE(l, nullptr);
  env.set_fail_new_files(true);
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr).ok());
  EXPECT_TRUE(l->BeginUnprepare("uid-a").ok());
  // The half-written compaction output does not stay behind eating space.
  EXPECT_FALSE(PathExists(TmpPath()));
  env.set_fail_new_files(false);
  l.reset();
  auto again = Open(Options());
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->report().clean()) << again->report().Summary();
  EXPECT_EQ((*again->Get("uid-a"))->state, ClaimState::kUnprepareStarted);
}

TEST_F(LedgerFaultsTest, ForcedCompactionOnAFullDiskFailsCleanly) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  auto l = Open(o);
  PrepareFully(*l, "uid-a", {"gpu-0"});
  env.set_fail_new_files(true);
  EXPECT_FALSE(l->CollectGarbage(/*force_compaction=*/true).ok());
  EXPECT_FALSE(PathExists(TmpPath()));
  env.set_fail_new_files(false);
  // The ledger goes on working from the file it had.
  PrepareFully(*l, "uid-b", {"gpu-1"});
  EXPECT_TRUE(l->CollectGarbage(true).ok());
  EXPECT_EQ(l->List()->size(), 2u);
}

// A damaged log is rewritten on open; on a full disk the rewrite cannot
// happen, and the plugin must still start (a crash loop would not free space).
TEST_F(LedgerFaultsTest, OpenOfADamagedLedgerOnAFullDiskSucceeds) {
  {
    auto l = Open(Options());
    PrepareFully(*l, "uid-a", {"gpu-0"});
  }
  auto bytes = *ReadFileToString(LogPath());
  ASSERT_TRUE(WriteFileAtomically(LogPath(), bytes + "torn-tail").ok());
  FaultInjectionEnv env;
  env.set_fail_new_files(true);
  auto o = Options();
  o.env = &env;
  auto l = Open(o);
  ASSERT_NE(l, nullptr);
  EXPECT_FALSE(l->report().clean());
  EXPECT_EQ((*l->Get("uid-a"))->state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(l->BeginPrepare(Request("uid-b", {"gpu-0"})).status().code(), StatusCode::kConflict);
  PrepareFully(*l, "uid-c", {"gpu-1"});
  EXPECT_FALSE(PathExists(TmpPath()));
  env.set_fail_new_files(false);
  l.reset();
  auto again = Open(Options());
  EXPECT_EQ((*again->Get("uid-c"))->state, ClaimState::kPrepareCompleted);
  EXPECT_EQ((*again->Get("uid-a"))->state, ClaimState::kPrepareCompleted);
}

TEST_F(LedgerFaultsTest, DirectoryPlantedAtTheTempPathNeverBlocksOpen) {
  { auto l = Open(Options()); }
  ASSERT_EQ(::mkdir(TmpPath().c_str(), 0700), 0);
  ASSERT_TRUE(WriteFileAtomically(JoinPath(TmpPath(), "inside"), "x").ok());
  for (int i = 0; i < 2; ++i) {
    auto l = Open(Options());
    ASSERT_NE(l, nullptr);
    PrepareFully(*l, "uid-" + std::to_string(i), {"gpu-" + std::to_string(i)});
    EXPECT_TRUE(l->CollectGarbage(true).ok());
  }
  // Set aside, not deleted: it is not ours.
  EXPECT_FALSE(PathExists(TmpPath()));
  EXPECT_EQ(SideFiles("tmp-blocked").size(), 1u);
}

TEST_F(LedgerFaultsTest, CompactionNeverWritesThroughASymlinkAtTheTempPath) {
  auto l = Open(Options());
  PrepareFully(*l, "uid-a", {"gpu-0"});
  std::string victim = Path("victim");
  ASSERT_TRUE(WriteFileAtomically(victim, "precious").ok());
  ASSERT_EQ(::symlink(victim.c_str(), TmpPath().c_str()), 0);
  EXPECT_TRUE(l->CollectGarbage(true).ok());
  EXPECT_EQ(*ReadFileToString(victim), "precious");
  EXPECT_EQ((*l->Get("uid-a"))->state, ClaimState::kPrepareCompleted);
  l.reset();
  EXPECT_EQ((*Open(Options())->Get("uid-a"))->state, ClaimState::kPrepareCompleted);
}

TEST_F(LedgerFaultsTest, LockFileSymlinkIsNotFollowed) {
  std::string victim = Path("elsewhere");
  ASSERT_EQ(::symlink(victim.c_str(), Path(kLockFileName).c_str()), 0);
  auto l = ClaimLedger::Open(Options());
  EXPECT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("symbolic link"), std::string::npos) << l.status().message();
  EXPECT_FALSE(PathExists(victim));
}

// Item: an empty or unreadable ledger is never taken as "no claims".
TEST_F(LedgerFaultsTest, EmptyLedgerIsQuarantinedAndReportedAsLostClaims) {
  ASSERT_TRUE(WriteFileAtomically(LogPath(), "").ok());
  auto l = Open(Options());
  ASSERT_NE(l, nullptr);
  OpenReport r = l->report();
  EXPECT_FALSE(r.clean());
  EXPECT_TRUE(r.claims_may_be_missing);
  ASSERT_FALSE(r.set_aside_file.empty());
  EXPECT_TRUE(PathExists(r.set_aside_file));
  EXPECT_TRUE(*l->ClaimsMayBeMissing());
}

TEST_F(LedgerFaultsTest, UnreadableLedgerKeepsReportingLostClaimsUntilRecovered) {
  ASSERT_TRUE(WriteFileAtomically(LogPath(), "this is not a ledger at all, not even close").ok());
  {
    auto l = Open(Options());
    EXPECT_TRUE(l->report().claims_may_be_missing);
  }
  // A restart must not forget it: the reconciler would delete CDI specs then.
  auto l = Open(Options());
  EXPECT_TRUE(l->report().claims_may_be_missing);
  EXPECT_TRUE(*l->ClaimsMayBeMissing());
  ASSERT_TRUE(l->FinishRecovery().ok());
  EXPECT_FALSE(*l->ClaimsMayBeMissing());
  l.reset();
  auto after = Open(Options());
  EXPECT_FALSE(after->report().claims_may_be_missing);
  EXPECT_TRUE(after->report().clean()) << after->report().Summary();
}

TEST_F(LedgerFaultsTest, RebuiltEntryHoldsItsDevicesAndAdoptsTheFirstPrepare) {
  auto l = Open(Options());
  RebuiltClaim c;
  c.uid = "uid-a";
  c.devices = {"gpu-0"};
  c.cdi_device_ids = {"k8s.gpu.nvidia.com/claim=uid-a-gpu-0"};
  ASSERT_TRUE(l->RebuildEntry(c).ok());
  EXPECT_EQ(l->BeginPrepare(Request("uid-b", {"gpu-0"})).status().code(), StatusCode::kConflict);
  // The same claim again is a no-op; another claim on the same device is refused.
  EXPECT_TRUE(l->RebuildEntry(c).ok());
  RebuiltClaim other = c;
  other.uid = "uid-z";
  EXPECT_EQ(l->RebuildEntry(other).code(), StatusCode::kConflict);
  // The kubelet's next Prepare brings the real allocation and name: redo.
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->outcome, BeginOutcome::kRetry);
  EXPECT_EQ(b->entry.name, "claim-uid-a");
  ASSERT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr).ok());
  EXPECT_EQ((*l->Get("uid-a"))->allocation, testing::Alloc({"gpu-0"}));
}

// Item: replay never admits a double hold.
TEST_F(LedgerFaultsTest, DoubleHoldInADamagedLogIsReportedAndNeverReleasedEarly) {
  {
    auto l = Open(Options());
    PrepareFully(*l, "uid-a", {"gpu-0"});
  }
  // A record the conflict check would never have allowed: uid-b on gpu-0 too.
  ClaimEntry b;
  b.uid = "uid-b";
  b.state = ClaimState::kPrepareCompleted;
  b.allocation = testing::Alloc({"gpu-0"});
  b.held = {"gpu-0"};
  b.boot_id = "boot-1";
  AppendEntry(EntryToJson(b));
  auto l = Open(Options());
  OpenReport r = l->report();
  ASSERT_FALSE(r.clean());
  std::string all = r.Summary();
  EXPECT_NE(all.find("gpu-0"), std::string::npos) << all;
  EXPECT_NE(all.find("uid-a"), std::string::npos) << all;
  EXPECT_NE(all.find("uid-b"), std::string::npos) << all;
  auto insp = InspectLedger(dir_.path());
  ASSERT_TRUE(insp.ok());
  EXPECT_TRUE(insp->inconsistent());
  // Releasing one of the two leaves the device with the other.
  ASSERT_TRUE(l->BeginUnprepare("uid-b").ok());
  ASSERT_TRUE(l->FinishUnprepare("uid-b").ok());
  auto c = l->BeginPrepare(Request("uid-c", {"gpu-0"}));
  EXPECT_EQ(c.status().code(), StatusCode::kConflict) << c.status().ToString();
  EXPECT_NE(c.status().message().find("uid-a"), std::string::npos);
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  EXPECT_TRUE(l->BeginPrepare(Request("uid-c", {"gpu-0"})).ok());
}

// Item: an entry in a state this binary does not know supersedes older ones.
TEST_F(LedgerFaultsTest, UnknownStateSupersedesOlderEntriesOfItsClaim) {
  {
    auto l = Open(Options());
    PrepareFully(*l, "uid-a", {"gpu-0"});
  }
  ClaimEntry newer;
  {
    auto l = Open(Options());
    newer = **l->Get("uid-a");
  }
  nlohmann::json j = EntryToJson(newer);
  j["state"] = "PrepareVerifying";  // a state of a future version
  j["held"] = {"gpu-0", "gpu-7"};
  AppendEntry(j);
  auto l = Open(Options());
  EXPECT_FALSE(l->report().warnings.empty());
  // Not the older PrepareCompleted: a Prepare must not answer from it.
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(b->outcome, BeginOutcome::kAlreadyPrepared);
  // Its resources are held.
  EXPECT_EQ(l->BeginPrepare(Request("uid-x", {"gpu-7"})).status().code(), StatusCode::kConflict);
  // A rewrite keeps the newer state for the version that understands it.
  ASSERT_TRUE(l->CollectGarbage(true).ok());
  EXPECT_NE(ReadFileToString(LogPath())->find("PrepareVerifying"), std::string::npos);
  l.reset();
  auto again = Open(Options());
  EXPECT_NE((*again->BeginPrepare(Request("uid-a", {"gpu-0"}))).outcome, BeginOutcome::kAlreadyPrepared);
  // The kubelet can still release it.
  auto u = again->BeginUnprepare("uid-a");
  ASSERT_TRUE(u.ok() && u->has_value()) << u.status().ToString();
  ASSERT_TRUE(again->FinishUnprepare("uid-a").ok());
  EXPECT_TRUE(again->BeginPrepare(Request("uid-x", {"gpu-7"})).ok());
}

// Item 11 (persisted JSON): a record nested 70,000 deep is not parsed
// recursively; it is kept verbatim like any record this version cannot read.
TEST_F(LedgerFaultsTest, DeeplyNestedRecordIsKeptVerbatimNotRecursedInto) {
  {
    auto l = Open(Options());
    PrepareFully(*l, "uid-a", {"gpu-0"});
  }
  std::string deep = R"({"uid":"uid-b","state":"PrepareStarted","undo":)" + std::string(70000, '[') +
                     std::string(70000, ']') + "}";
  auto bytes = *ReadFileToString(LogPath());
  ASSERT_TRUE(WriteFileAtomically(LogPath(), bytes + EncodeRecord(2, deep)).ok());
  auto l = Open(Options());
  ASSERT_NE(l, nullptr);
  EXPECT_FALSE(l->report().warnings.empty());
  EXPECT_FALSE(l->Get("uid-b")->has_value());
  EXPECT_EQ((*l->Get("uid-a"))->state, ClaimState::kPrepareCompleted);
  ASSERT_TRUE(l->CollectGarbage(true).ok());
  EXPECT_NE(ReadFileToString(LogPath())->find(std::string(1000, '[')), std::string::npos);
}

// Operators grep for upstream's words, at upstream's level: V(6).
TEST_F(LedgerFaultsTest, UnprepareLogsUpstreamsDeletedClaimLineAtV6) {
  for (int v : {5, 6}) {
    std::ostringstream out;
    InitLoggingTo(std::make_shared<spdlog::sinks::ostream_sink_mt>(out), v);
    {
      auto l = Open(Options());
      const std::string uid = "uid-v" + std::to_string(v);
      PrepareFully(*l, uid, {"gpu-0"});
      ASSERT_TRUE(l->BeginUnprepare(uid).ok());
      ASSERT_TRUE(l->FinishUnprepare(uid).ok());
    }
    const bool logged = out.str().find("Deleted claim from checkpoint: default/claim-uid-v") != std::string::npos;
    EXPECT_EQ(logged, v >= 6) << "v=" << v << ": " << out.str();
  }
  InitLogging(0);
}

}  // namespace
}  // namespace nvdra::ledger
