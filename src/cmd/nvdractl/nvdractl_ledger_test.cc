// Runs the real nvdractl binary against ledgers on disk, healthy and damaged.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/test_paths.h"
#include "ledger/claim_ledger.h"
#include "ledger/ledger_test_util.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::ctl {
namespace {

using ledger::testing::Prepared;
using ledger::testing::Request;
using ::nvdra::testing::TempDir;

struct CtlRun {
  int exit_code = -1;
  std::string out;
};

CtlRun Nvdractl(const std::string& args) {
  std::string cmd = std::string(NVDRA_BIN_DIR) + "/nvdractl " + args + " 2>&1";
  CtlRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

void MakeLedger(const std::string& dir) {
  ledger::LedgerOptions o;
  o.dir = dir;
  o.boot_id = "boot-1";
  auto l = std::move(ledger::ClaimLedger::Open(o)).value();
  ASSERT_TRUE(l->BeginPrepare(Request("uid-a", {"gpu-0"})).ok());
  ASSERT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr).ok());
  ASSERT_TRUE(l->BeginPrepare(Request("uid-b", {"gpu-1"})).ok());
}

TEST(NvdractlLedgerTest, ShowPrintsClaimsAsTableAndJson) {
  TempDir dir{"nvdra-ledger"};
  MakeLedger(dir.path());
  CtlRun table = Nvdractl("ledger show " + dir.path());
  EXPECT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("uid-a"), std::string::npos);
  EXPECT_NE(table.out.find("PrepareCompleted"), std::string::npos);
  EXPECT_NE(table.out.find("k8s.gpu.nvidia.com/claim=uid-a-gpu-0"), std::string::npos);
  CtlRun json = Nvdractl("ledger show --json " + dir.path());
  ASSERT_EQ(json.exit_code, 0) << json.out;
  auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["claims"].size(), 2u);
  EXPECT_EQ(j["claims"][1]["state"], "PrepareStarted");
  EXPECT_EQ(j["damaged"], false);
}

TEST(NvdractlLedgerTest, VerifyPassesOnHealthyLedger) {
  TempDir dir{"nvdra-ledger"};
  MakeLedger(dir.path());
  CtlRun r = Nvdractl("ledger verify " + dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("OK"), std::string::npos);
}

TEST(NvdractlLedgerTest, VerifyFailsOnDamageAndLeavesTheDirectoryAlone) {
  TempDir dir{"nvdra-ledger"};
  MakeLedger(dir.path());
  std::string path = JoinPath(dir.path(), ledger::kLogFileName);
  std::string bytes = *ReadFileToString(path);
  bytes[bytes.find("uid-b") + 1] ^= 0x20;
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  auto before = *ListDirectory(dir.path());
  CtlRun r = Nvdractl("ledger verify " + dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("DAMAGE"), std::string::npos);
  EXPECT_EQ(*ListDirectory(dir.path()), before);
  EXPECT_EQ(*ReadFileToString(path), bytes);
  // show still lists what verifies.
  CtlRun show = Nvdractl("ledger show " + dir.path());
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_NE(show.out.find("uid-a"), std::string::npos);
}

TEST(NvdractlLedgerTest, VerifyWithoutLedgerExitsTwo) {
  TempDir dir{"nvdra-ledger"};
  EXPECT_EQ(Nvdractl("ledger verify " + dir.path()).exit_code, 2);
}

}  // namespace
}  // namespace nvdra::ctl
