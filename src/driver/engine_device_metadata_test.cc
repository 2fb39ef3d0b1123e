// The engine with device metadata files (DeviceMetadata gate): a real
// ledger, real CDI specs and metadata files on a temporary directory.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "driver/engine.h"
#include "driver/engine_test_util.h"
#include "driver/reconciler.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::driver {
namespace {

using testing::FakeClaimSource;
using testing::FakeKind;

using testing::kDriver;
using testing::kFar;
using testing::Ref;

// Requests "gpus" (gpu-0, gpu-1) and the subrequest "vm/passthrough"
// (gpu-2), from the template claim "gpu" of a pod.
ClaimSnapshot PassthroughClaim(const std::string& uid, const std::string& name) {
  ClaimSnapshot c;
  c.uid = uid;
  c.ns = "default";
  c.name = name;
  c.allocated = true;
  c.results = {{"gpus", kDriver, "node-1", "gpu-0", false, ""},
               {"gpus", kDriver, "node-1", "gpu-1", false, ""},
               {"vm/passthrough", kDriver, "node-1", "gpu-2", false, ""}};
  c.pod_claim_name = "gpu";
  return c;
}

class EngineDeviceMetadataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    ASSERT_TRUE(MakeDirectories(dir_ + "/plugin").ok());
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/boot_id", "boot-1\n").ok());
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.gpu.nvidia.com", "claim");
    ASSERT_TRUE(cdi_->EnsureRoot().ok());
    files_ = std::make_unique<DeviceMetadataFiles>(kDriver, dir_ + "/plugin", dir_ + "/cdi");
    kind_.metadata_attributes["gpu-2"] = {{"type", std::string("vfio")}, {"index", int64_t{2}}};
    Reopen(/*gate=*/true);
  }
  void TearDown() override {
    FailPoints::Process().Clear();
    reconciler_.reset();
    engine_.reset();
    ledger_.reset();
  }
  // The plugin starts (again) on the same directories, the gate on or off.
  void Reopen(bool gate) {
    reconciler_.reset();
    engine_.reset();
    ledger_.reset();
    ledger::LedgerOptions o;
    o.dir = dir_ + "/plugin";
    o.boot_id_path = dir_ + "/boot_id";
    o.clock = &clock_;
    auto l = ledger::ClaimLedger::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    ledger_ = std::move(l).value();
    EngineOptions eo;
    auto gates = config::FeatureGates::Parse(gate ? "PassthroughSupport=true,DeviceMetadata=true" : "");
    ASSERT_TRUE(gates.ok()) << gates.status().ToString();
    eo.gates = *gates;
    eo.metadata = files_.get();
    engine_ = std::make_unique<Engine>(eo, *ledger_, kind_, claims_, *cdi_, nullptr);
    ReconcilerOptions ro;
    ro.clock = &clock_;
    ro.completed_grace = std::chrono::minutes(10);
    reconciler_ = std::make_unique<Reconciler>(*engine_, claims_, nullptr, ro);
  }
  std::string Id(const std::string& uid, const std::string& base) { return files_->DeviceId(uid, base); }
  std::string ClaimId(const std::string& uid, const std::string& device) { return cdi_->DeviceId(uid, device); }
  bool AnyMetadataLeft() {
    auto uids = files_->ListUids();
    EXPECT_TRUE(uids.ok());
    auto claims = ListDirectory(files_->Root());
    return !uids.ok() || !uids->empty() || (claims.ok() && !claims->empty());
  }
  off_t LedgerSize() {
    struct stat st;
    return ::stat(ledger_->log_path().c_str(), &st) == 0 ? st.st_size : -1;
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-engine-metadata"};
  std::string dir_;
  FakeClock clock_;
  FakeClaimSource claims_;
  FakeKind kind_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  std::unique_ptr<DeviceMetadataFiles> files_;
  std::unique_ptr<ledger::ClaimLedger> ledger_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Reconciler> reconciler_;
};

TEST_F(EngineDeviceMetadataTest, PrepareWritesAFilePerRequestAndAnswersItsCdiId) {
  auto c = PassthroughClaim("uid-a", "pod-gpu-x7");
  claims_.Put(c);
  auto r = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(r.status().message(), "");
  ASSERT_EQ(r->size(), 3u);
  // The request's first device carries the id, as upstream's helper does.
  EXPECT_EQ((*r)[0].cdi_device_ids, (std::vector<std::string>{ClaimId("uid-a", "gpu-0"), Id("uid-a", "gpus")}));
  EXPECT_EQ((*r)[1].cdi_device_ids, (std::vector<std::string>{ClaimId("uid-a", "gpu-1")}));
  EXPECT_EQ((*r)[2].cdi_device_ids, (std::vector<std::string>{ClaimId("uid-a", "gpu-2"), Id("uid-a", "vm")}));
  MetadataClaim claim{"uid-a", "default", "pod-gpu-x7", std::string("gpu")};
  auto gpus = ReadFileToString(files_->FilePath("default", "pod-gpu-x7", "gpus"));
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(*gpus, files_->RenderFile(claim, "gpus", {{"node-1", "gpu-0", {}}, {"node-1", "gpu-1", {}}}));
  auto vm = ReadFileToString(files_->FilePath("default", "pod-gpu-x7", "vm"));
  ASSERT_TRUE(vm.ok());
  EXPECT_EQ(*vm,
            files_->RenderFile(claim, "vm/passthrough", {{"node-1", "gpu-2", kind_.metadata_attributes["gpu-2"]}}));
  EXPECT_NE(vm->find("\"index\": {\n"), std::string::npos) << *vm;
  EXPECT_TRUE(PathExists(files_->SpecPath("uid-a", "gpus")));
  EXPECT_TRUE(PathExists(files_->SpecPath("uid-a", "vm")));
  // The ledger records the answer, ids included.
  auto e = ledger_->Get("uid-a");
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->prepared, *r);
}

TEST_F(EngineDeviceMetadataTest, RepeatedPrepareAnswersTheSameAndRestoresALostSpec) {
  auto c = PassthroughClaim("uid-a", "pod-gpu-x7");
  claims_.Put(c);
  auto first = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(first.status().message(), "");
  const off_t size = LedgerSize();
  const int gets = claims_.gets();
  auto again = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(again.status().message(), "");
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(claims_.gets(), gets) << "files in place: answered from the ledger";
  // The CDI directory is tmpfs: a lost metadata spec is written again, from
  // the claim as the API server has it (its pod claim name).
  const std::string spec = files_->SpecPath("uid-a", "vm");
  auto before = ReadFileToString(spec);
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(RemoveFileIfExists(spec).ok());
  auto third = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(third.status().message(), "");
  EXPECT_EQ(*third, *first);
  auto after = ReadFileToString(spec);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *before);
  EXPECT_EQ(LedgerSize(), size) << "an idempotent prepare must not write to the ledger";
}

TEST_F(EngineDeviceMetadataTest, UnprepareRemovesFilesAndSpecs) {
  auto c = PassthroughClaim("uid-a", "pod-gpu-x7");
  claims_.Put(c);
  ASSERT_EQ(engine_->PrepareClaim(Ref(c), kFar).status().message(), "");
  ASSERT_TRUE(AnyMetadataLeft());
  ASSERT_EQ(engine_->UnprepareClaim(Ref(c), kFar).message(), "");
  EXPECT_FALSE(AnyMetadataLeft());
  EXPECT_FALSE(PathExists(files_->ClaimDir("default", "pod-gpu-x7")));
}

TEST_F(EngineDeviceMetadataTest, WithoutTheGateNothingIsWritten) {
  Reopen(/*gate=*/false);
  auto c = PassthroughClaim("uid-a", "pod-gpu-x7");
  claims_.Put(c);
  auto r = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(r.status().message(), "");
  for (const auto& d : *r) EXPECT_EQ(d.cdi_device_ids, std::vector<std::string>{ClaimId("uid-a", d.device)});
  EXPECT_FALSE(PathExists(files_->Root()));
  EXPECT_FALSE(AnyMetadataLeft());
}

// Prepared with the gate on, unprepared after a restart with it off.
TEST_F(EngineDeviceMetadataTest, UnprepareAfterTheGateWentOffStillRemoves) {
  auto c = PassthroughClaim("uid-a", "pod-gpu-x7");
  claims_.Put(c);
  ASSERT_EQ(engine_->PrepareClaim(Ref(c), kFar).status().message(), "");
  Reopen(/*gate=*/false);
  ASSERT_EQ(engine_->UnprepareClaim(Ref(c), kFar).message(), "");
  EXPECT_FALSE(AnyMetadataLeft());
}

// The files are written after PrepareStarted names the claim: a prepare
// that stops right after them (a crash, a failure) leaves an entry from
// which the reconciler removes them once the claim is gone.
TEST_F(EngineDeviceMetadataTest, AHalfPreparedClaimsFilesGoWithIt) {
  auto c = PassthroughClaim("uid-a", "pod-gpu-x7");
  claims_.Put(c);
  ASSERT_TRUE(FailPoints::Process().Load("engine-after-metadata-write=error").ok());
  ASSERT_NE(engine_->PrepareClaim(Ref(c), kFar).status().message(), "");
  FailPoints::Process().Clear();
  ASSERT_TRUE(AnyMetadataLeft());
  Reopen(/*gate=*/true);
  auto e = ledger_->Get("uid-a");
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->state, ledger::ClaimState::kPrepareStarted);
  claims_.Remove("default", "pod-gpu-x7");
  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.unprepared_started, 1);
  EXPECT_FALSE(AnyMetadataLeft());
}

// An Unprepare stopped after the files went (before FinishUnprepare)
// completes on its retry.
TEST_F(EngineDeviceMetadataTest, AnUnprepareStoppedAfterTheRemovalCompletesOnRetry) {
  auto c = PassthroughClaim("uid-a", "pod-gpu-x7");
  claims_.Put(c);
  ASSERT_EQ(engine_->PrepareClaim(Ref(c), kFar).status().message(), "");
  ASSERT_TRUE(FailPoints::Process().Load("engine-after-metadata-remove=error").ok());
  ASSERT_NE(engine_->UnprepareClaim(Ref(c), kFar).message(), "");
  FailPoints::Process().Clear();
  EXPECT_FALSE(AnyMetadataLeft());
  ASSERT_EQ(engine_->UnprepareClaim(Ref(c), kFar).message(), "");
  auto e = ledger_->Get("uid-a");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->has_value() && ledger::HoldsResources((*e)->state));
}

// Metadata of a claim the ledger does not hold (its entry lost, or a
// crash before the entry's last transition was written) is swept; a live
// claim's stays.
TEST_F(EngineDeviceMetadataTest, TheSweepRemovesMetadataOfClaimsTheLedgerDoesNotHold) {
  auto live = PassthroughClaim("uid-live", "live");
  claims_.Put(live);
  ASSERT_EQ(engine_->PrepareClaim(Ref(live), kFar).status().message(), "");
  MetadataClaim orphan{"uid-orphan", "default", "gone", std::nullopt};
  ASSERT_TRUE(files_->Write(orphan, "gpus", {{"node-1", "gpu-5", {}}}).ok());
  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.errors, 0);
  EXPECT_GE(rep.orphan_specs_removed, 1);
  EXPECT_FALSE(PathExists(files_->SpecPath("uid-orphan", "gpus")));
  EXPECT_FALSE(PathExists(files_->ClaimDir("default", "gone")));
  EXPECT_TRUE(PathExists(files_->FilePath("default", "live", "gpus")));
  EXPECT_TRUE(PathExists(files_->SpecPath("uid-live", "vm")));
}

}  // namespace
}  // namespace nvdra::driver
