// The ledger on a small volume, as a plugin directory on a tmpfs of a few
// hundred KiB: ctest runs this binary in a mount namespace of its own with
// NVDRA_SMALL_VOLUME naming a 200 KiB tmpfs (see CMakeLists.txt). One claim
// prepared and unprepared thousands of times never fills it (compaction
// starts at a 16th of the volume), and a volume that something else filled
// up is met by compacting into the space the ledger keeps in reserve, so
// every transition succeeds and a restart finds what was recorded.
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

#include "ledger/claim_ledger.h"
#include "ledger/ledger_test_util.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

constexpr const char* kUid = "4b9a8f2e-1c3d-4e5f-8a7b-000000000001";

class SmallVolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("NVDRA_SMALL_VOLUME");
    if (dir == nullptr || *dir == '\0') {
      GTEST_SKIP() << "ctest runs this with NVDRA_SMALL_VOLUME, a 200 KiB tmpfs in a mount namespace";
    }
    dir_ = dir;
  }
  LedgerOptions Options() const {
    LedgerOptions o;
    o.dir = dir_ + "/plugin";
    o.boot_id = "boot-1";
    o.tombstone_ttl = std::chrono::seconds(300);
    return o;
  }
  // One kubelet cycle of the claim: Prepare (the pod is in reservedFor,
  // so a Prepare after the last Unprepare is legitimate) and Unprepare.
  static Status Cycle(ClaimLedger& l, int i) {
    auto req = testing::Request(kUid, {"gpu-2"});
    req.consumers = {"pod-" + std::to_string(i)};
    NVDRA_ASSIGN_OR_RETURN(BeginResult b, l.BeginPrepare(req));
    NVDRA_RETURN_IF_ERROR(l.CompletePrepare(kUid, testing::Prepared(kUid, {"gpu-2"}), req.undo, b.entry.attempt));
    NVDRA_ASSIGN_OR_RETURN(auto e, l.BeginUnprepare(kUid));
    if (!e) return Internal("claim vanished");
    return l.FinishUnprepare(kUid);
  }
  uint64_t FreeBytes() const {
    struct statvfs v;
    return ::statvfs(dir_.c_str(), &v) == 0 ? static_cast<uint64_t>(v.f_bavail) * v.f_frsize : 0;
  }
  std::string dir_;
};

TEST_F(SmallVolumeTest, ThousandsOfCyclesOfOneClaimNeverFillTheVolume) {
  auto l = ClaimLedger::Open(Options());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  uint64_t largest = 0;
  for (int i = 0; i < 3000; ++i) {
    Status s = Cycle(**l, i);
    ASSERT_TRUE(s.ok()) << "cycle " << i << ": " << s.ToString();
    largest = std::max(largest, testing::FileSize((*l)->log_path()));
  }
  // Compaction starts at a 16th of the volume (12.5 KiB) plus twice the
  // live records, never at the 1 MiB a large volume gets.
  EXPECT_LT(largest, 24u << 10);
  auto held = (*l)->HolderOf("gpu-2");
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(held->has_value()) << "a claim was left holding gpu-2";
}

TEST_F(SmallVolumeTest, AVolumeSomethingElseFilledIsMetByCompactingIntoTheReserve) {
  LedgerOptions o = Options();
  o.compaction_ratio = 1e6;  // no compaction until the volume is full
  auto l = ClaimLedger::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_TRUE(PathExists(o.dir + "/ledger.reserve")) << "the reserve is written at open";
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Cycle(**l, i).ok());
  // Something else fills the volume to the last byte.
  const std::string filler = dir_ + "/filler";
  int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  std::string chunk(4096, 'x');
  while (::write(fd, chunk.data(), chunk.size()) > 0) {
  }
  ASSERT_EQ(errno, ENOSPC);
  while (::write(fd, chunk.data(), 1) > 0) {
  }
  ::close(fd);
  EXPECT_LT(FreeBytes(), 4096u);
  // Every transition still succeeds: the first that finds no room compacts.
  int i = 20;
  for (; i < 400; ++i) {
    Status s = Cycle(**l, i);
    ASSERT_TRUE(s.ok()) << "cycle " << i << ": " << s.ToString();
  }
  auto held = (*l)->HolderOf("gpu-2");
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(held->has_value());
  // A prepared claim survives a restart on the full volume.
  auto req = testing::Request(kUid, {"gpu-2"});
  req.consumers = {"pod-last"};
  auto b = (*l)->BeginPrepare(req);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE((*l)->CompletePrepare(kUid, testing::Prepared(kUid, {"gpu-2"}), req.undo, b->entry.attempt).ok());
  l->reset();
  auto again = ClaimLedger::Open(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto e = (*again)->Get(kUid);
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->state, ClaimState::kPrepareCompleted);
  auto un = (*again)->BeginUnprepare(kUid);
  ASSERT_TRUE(un.ok() && un->has_value()) << un.status().ToString();
  EXPECT_TRUE((*again)->FinishUnprepare(kUid).ok());
  ASSERT_TRUE(RemoveFileIfExists(filler).ok());
}

}  // namespace
}  // namespace nvdra::ledger
