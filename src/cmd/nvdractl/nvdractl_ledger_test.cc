// Runs the real nvdractl binary against ledgers on disk, healthy and damaged.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cmd/nvdractl/nvdractl_test_util.h"
#include "ledger/claim_ledger.h"
#include "ledger/ledger_test_util.h"
#include "ledger/legacy_checkpoint.h"
#include "ledger/log_format.h"
#include "util/file_util.h"
#include "util/test_paths.h"
#include "util/test_temp_dir.h"

namespace nvdra::ctl {
namespace {

using ledger::testing::Prepared;
using ledger::testing::Request;
using ::nvdra::testing::TempDir;

using testing::CtlRun;
using testing::Nvdractl;

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

TEST(NvdractlLedgerTest, ShowListsLiveClaimsByDefaultAndTombstonesWithAll) {
  TempDir dir{"nvdra-ledger"};
  {
    ledger::LedgerOptions o;
    o.dir = dir.path();
    o.boot_id = "boot-1";
    auto l = std::move(ledger::ClaimLedger::Open(o)).value();
    auto req = Request("uid-live", {"gpu-0"});
    req.consumers = {"pod-uid-1"};
    ASSERT_TRUE(l->BeginPrepare(req).ok());
    ASSERT_TRUE(l->CompletePrepare("uid-live", Prepared("uid-live", {"gpu-0"}), nullptr).ok());
    ASSERT_TRUE(l->BeginPrepare(Request("uid-gone", {"gpu-1"})).ok());
    ASSERT_TRUE(l->BeginUnprepare("uid-gone").ok());
    ASSERT_TRUE(l->FinishUnprepare("uid-gone").ok());
  }
  CtlRun table = Nvdractl("ledger show " + dir.path());
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("POD"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("AGE"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("pod-uid-1"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("uid-gone"), std::string::npos) << "a tombstone's device is no live claim's\n" << table.out;
  EXPECT_NE(table.out.find("1 live claims (1 tombstones not shown; --all lists them)"), std::string::npos) << table.out;
  CtlRun all = Nvdractl("ledger show --all " + dir.path());
  ASSERT_EQ(all.exit_code, 0) << all.out;
  EXPECT_NE(all.out.find("uid-gone"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("Tombstone"), std::string::npos) << all.out;
  // Without a ledger, show says so as verify does.
  TempDir empty{"nvdra-ledger"};
  CtlRun none = Nvdractl("ledger show " + empty.path());
  EXPECT_EQ(none.exit_code, 2) << none.out;
  EXPECT_NE(none.out.find("no ledger"), std::string::npos) << none.out;
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

// --- rebuild, export-upstream, and what verify reports.

void WriteSpec(const std::string& root, const std::string& uid, const std::vector<std::string>& devices) {
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& d : devices) {
    devs.push_back({{"name", uid + "-" + d}, {"containerEdits", {{"deviceNodes", {{{"path", "/dev/nvidia0"}}}}}}});
  }
  nlohmann::json spec = {{"cdiVersion", "0.5.0"}, {"kind", "k8s.gpu.nvidia.com/claim"}, {"devices", devs}};
  ASSERT_TRUE(MakeDirectories(root).ok());
  ASSERT_TRUE(WriteFileAtomically(root + "/k8s.gpu.nvidia.com-claim_" + uid + ".json", spec.dump()).ok());
}

TEST(NvdractlLedgerTest, RebuildRecordsClaimsFromCdiSpecsAfterAnUnreadableLedger) {
  TempDir dir{"nvdra-ledger"};
  std::string cdi = dir.path() + "/cdi", data = dir.path() + "/data";
  ASSERT_TRUE(MakeDirectories(data).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(data, ledger::kLogFileName), "garbage, not a ledger").ok());
  WriteSpec(cdi, "uid-a", {"gpu-0", "gpu-1"});
  WriteSpec(cdi, "uid-b", {"gpu-2"});
  CtlRun r = Nvdractl("ledger rebuild " + data + " --cdi-root " + cdi + " --driver gpu.nvidia.com");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("uid-a"), std::string::npos) << r.out;
  ledger::LedgerOptions o;
  o.dir = data;
  o.boot_id = "boot-1";
  auto l = std::move(ledger::ClaimLedger::Open(o)).value();
  EXPECT_FALSE(*l->ClaimsMayBeMissing());
  auto a = **l->Get("uid-a");
  EXPECT_EQ(a.state, ledger::ClaimState::kPrepareCompleted);
  EXPECT_EQ(a.held, (std::vector<std::string>{"gpu-0", "gpu-1"}));
  ASSERT_EQ(a.prepared.size(), 2u);
  EXPECT_EQ(a.prepared[0].cdi_device_ids, std::vector<std::string>{"k8s.gpu.nvidia.com/claim=uid-a-gpu-0"});
  EXPECT_EQ(l->BeginPrepare(Request("uid-c", {"gpu-2"})).status().code(), StatusCode::kConflict);
  // Running it again changes nothing.
  CtlRun again = Nvdractl("ledger rebuild " + data + " --cdi-root " + cdi + " --driver gpu.nvidia.com");
  EXPECT_EQ(again.exit_code, 0) << again.out;
}

TEST(NvdractlLedgerTest, RebuildReadsTheGoDriversYamlSpecs) {
  TempDir dir{"nvdra-ledger"};
  std::string cdi = dir.path() + "/cdi", data = dir.path() + "/data";
  ASSERT_TRUE(MakeDirectories(data).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(data, ledger::kLogFileName), "garbage, not a ledger").ok());
  WriteSpec(cdi, "uid-a", {"gpu-0"});
  // As the Go driver writes it (CDI's WriteSpec: YAML, "---" first).
  ASSERT_TRUE(WriteFileAtomically(cdi + "/k8s.gpu.nvidia.com-claim_uid-go.yaml",
                                  "---\ncdiVersion: 0.5.0\nkind: k8s.gpu.nvidia.com/claim\ndevices:\n"
                                  "- name: uid-go-gpu-3\n  containerEdits:\n    deviceNodes:\n"
                                  "    - path: /dev/nvidia3\n")
                  .ok());
  CtlRun r = Nvdractl("ledger rebuild " + data + " --cdi-root " + cdi + " --driver gpu.nvidia.com");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("rebuilt uid-go: gpu-3"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("No such file"), std::string::npos) << r.out;
  ledger::LedgerOptions o;
  o.dir = data;
  o.boot_id = "boot-1";
  auto l = std::move(ledger::ClaimLedger::Open(o)).value();
  auto go = l->Get("uid-go");
  ASSERT_TRUE(go.ok() && go->has_value()) << r.out;
  EXPECT_EQ((*go)->held, std::vector<std::string>{"gpu-3"});
  EXPECT_EQ(l->BeginPrepare(Request("uid-c", {"gpu-3"})).status().code(), StatusCode::kConflict);
}

TEST(NvdractlLedgerTest, RebuildSkipsSpecDevicesWithoutAStringName) {
  TempDir dir{"nvdra-ledger"};
  std::string cdi = dir.path() + "/cdi", data = dir.path() + "/data";
  ASSERT_TRUE(MakeDirectories(data).ok());
  ASSERT_TRUE(WriteFileAtomically(JoinPath(data, ledger::kLogFileName), "garbage, not a ledger").ok());
  ASSERT_TRUE(MakeDirectories(cdi).ok());
  nlohmann::json spec = {{"cdiVersion", "0.5.0"},
                         {"kind", "k8s.gpu.nvidia.com/claim"},
                         {"devices", {{{"name", 5}}, {{"name", "uid-c-gpu-3"}}}}};
  ASSERT_TRUE(WriteFileAtomically(cdi + "/k8s.gpu.nvidia.com-claim_uid-c.json", spec.dump()).ok());
  CtlRun r = Nvdractl("ledger rebuild " + data + " --cdi-root " + cdi + " --driver gpu.nvidia.com");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ledger::LedgerOptions o;
  o.dir = data;
  o.boot_id = "boot-1";
  auto l = std::move(ledger::ClaimLedger::Open(o)).value();
  auto c = l->Get("uid-c");
  ASSERT_TRUE(c.ok() && c->has_value()) << r.out;
  EXPECT_EQ((*c)->held, std::vector<std::string>{"gpu-3"});
}

TEST(NvdractlLedgerTest, VerifyNamesDoubleHolds) {
  TempDir dir{"nvdra-ledger"};
  MakeLedger(dir.path());
  ledger::ClaimEntry b;
  b.uid = "uid-x";
  b.state = ledger::ClaimState::kPrepareCompleted;
  b.held = {"gpu-0"};
  std::string path = JoinPath(dir.path(), ledger::kLogFileName);
  ASSERT_TRUE(
      WriteFileAtomically(path, *ReadFileToString(path) + ledger::EncodeRecord(2, ledger::EntryToJson(b).dump())).ok());
  CtlRun r = Nvdractl("ledger verify " + dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("gpu-0 (claims uid-a, uid-x)"), std::string::npos) << r.out;
}

// The Go driver's checksum, written here independently of the ledger code.
uint32_t IndependentGoChecksum(const std::string& s) {
  std::string dump = "([]uint8)[";
  for (size_t i = 0; i < s.size(); ++i) {
    dump += (i ? " " : "") + std::to_string(static_cast<unsigned char>(s[i]));
  }
  dump += "]";
  uint32_t h = 2166136261u;
  for (unsigned char c : dump) h = (h ^ c) * 16777619u;
  return h;
}

TEST(NvdractlLedgerTest, ExportUpstreamWritesACheckpointTheGoDriverAccepts) {
  TempDir dir{"nvdra-ledger"};
  MakeLedger(dir.path());
  std::string boot = JoinPath(dir.path(), "boot_id");
  ASSERT_TRUE(WriteFileAtomically(boot, "boot-1\n").ok());
  CtlRun r = Nvdractl("ledger export-upstream " + dir.path() + " --boot-id-file " + boot);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::string cp = JoinPath(dir.path(), ledger::kLegacyCheckpointFileName);
  std::string text = *ReadFileToString(cp);
  // Checksums as the Go driver verifies them.
  auto doc = nlohmann::ordered_json::parse(text);
  std::string v2 = doc["v2"].dump();
  uint32_t v2_sum = doc["v2"]["checksum"].get<uint32_t>();
  auto v2_zero = doc["v2"];
  v2_zero["checksum"] = 0;
  EXPECT_EQ(IndependentGoChecksum(v2_zero.dump()), v2_sum) << text;
  EXPECT_EQ(IndependentGoChecksum("{\"checksum\":0,\"v1\":" + doc["v1"].dump() + "}"), doc["checksum"].get<uint32_t>());
  EXPECT_EQ(doc["v2"]["nodeBootID"], "boot-1");
  EXPECT_EQ(doc["v2"]["preparedClaims"]["uid-a"]["checkpointState"], "PrepareCompleted");
  EXPECT_EQ(doc["v2"]["preparedClaims"]["uid-b"]["checkpointState"], "PrepareStarted");
  EXPECT_EQ(doc["v2"]["preparedClaims"]["uid-a"]["preparedDevices"][0]["devices"][0]["gpu"]["device"]["DeviceName"],
            "gpu-0");
  EXPECT_FALSE(doc["v1"]["preparedClaims"].contains("uid-b"));  // v1 holds completed claims only
  // Our import reads it back: same claims, same devices.
  TempDir other{"nvdra-ledger"};
  ASSERT_TRUE(WriteFileAtomically(JoinPath(other.path(), ledger::kLegacyCheckpointFileName), text).ok());
  ledger::LedgerOptions o;
  o.dir = other.path();
  o.boot_id = "boot-1";
  auto l = std::move(ledger::ClaimLedger::Open(o)).value();
  ASSERT_EQ(l->report().imported_legacy_claims, 2u) << l->report().Summary();
  auto a = **l->Get("uid-a");
  EXPECT_EQ(a.state, ledger::ClaimState::kPrepareCompleted);
  EXPECT_EQ(a.prepared, Prepared("uid-a", {"gpu-0"}));
  EXPECT_EQ(a.allocation, ledger::testing::Alloc({"gpu-0"}));
  // A second export refuses to overwrite without --force.
  EXPECT_NE(Nvdractl("ledger export-upstream " + dir.path() + " --boot-id-file " + boot).exit_code, 0);
}

TEST(NvdractlLedgerTest, ExportUpstreamGivesImportedClaimsBackUnchanged) {
  TempDir dir{"nvdra-ledger"};
  // A checkpoint as the Go driver wrote it (one completed claim).
  std::string claim =
      R"({"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"}],"config":[{"source":"FromClass","opaque":{"driver":"gpu.nvidia.com","parameters":{"kind":"GpuConfig","apiVersion":"resource.nvidia.com/v1beta1","sharing":{"strategy":"TimeSlicing"}}}}]},"allocationTimestamp":"2026-01-01T00:00:00Z"},"reservedFor":[{"resource":"pods","name":"p","uid":"u"}]},"preparedDevices":[{"devices":[{"gpu":{"info":{"uuid":"GPU-1"},"device":{"Requests":["gpu"],"PoolName":"node-a","DeviceName":"gpu-0","CDIDeviceIDs":["k8s.gpu.nvidia.com/claim=7a4e1a8e-0000-4000-8000-000000000001-gpu-0"]}},"mig":null}],"configState":{"mpsControlDaemonID":""}}],"name":"c1","namespace":"default"})";
  std::string uid = "7a4e1a8e-0000-4000-8000-000000000001";
  std::string v2 = R"({"checksum":0,"preparedClaims":{")" + uid + "\":" + claim + R"(},"nodeBootID":"boot-1"})";
  std::string v1 = R"({"preparedClaims":{")" + uid + R"(":{"status":)" +
                   nlohmann::ordered_json::parse(claim)["status"].dump() + R"(,"preparedDevices":)" +
                   nlohmann::ordered_json::parse(claim)["preparedDevices"].dump() + "}}}";
  uint32_t c2 = IndependentGoChecksum(v2);
  v2.replace(v2.find(":0,"), 3, ":" + std::to_string(c2) + ",");
  std::string file = "{\"checksum\":" + std::to_string(IndependentGoChecksum("{\"checksum\":0,\"v1\":" + v1 + "}")) +
                     ",\"v1\":" + v1 + ",\"v2\":" + v2 + "}";
  std::string cp = JoinPath(dir.path(), ledger::kLegacyCheckpointFileName);
  ASSERT_TRUE(WriteFileAtomically(cp, file).ok());
  {
    ledger::LedgerOptions o;
    o.dir = dir.path();
    o.boot_id = "boot-1";
    auto l = std::move(ledger::ClaimLedger::Open(o)).value();
    ASSERT_EQ(l->report().imported_legacy_claims, 1u) << l->report().Summary();
  }
  std::string boot = JoinPath(dir.path(), "boot_id");
  ASSERT_TRUE(WriteFileAtomically(boot, "boot-1\n").ok());
  CtlRun r = Nvdractl("ledger export-upstream " + dir.path() + " --boot-id-file " + boot +
                      " --retire-ledger --cdi-root " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(*ReadFileToString(cp), file);  // byte for byte what the Go driver wrote
  EXPECT_FALSE(PathExists(JoinPath(dir.path(), ledger::kLogFileName)));
}

TEST(NvdractlLedgerTest, ExportUpstreamRefusesToRetireALedgerAPluginHolds) {
  TempDir dir{"nvdra-ledger"};
  MakeLedger(dir.path());
  std::string boot = JoinPath(dir.path(), "boot_id");
  ASSERT_TRUE(WriteFileAtomically(boot, "boot-1\n").ok());
  std::string cp = JoinPath(dir.path(), ledger::kLegacyCheckpointFileName);
  const std::string cmd = "ledger export-upstream " + dir.path() + " --boot-id-file " + boot +
                          " --retire-ledger --cdi-root " + dir.path();
  {
    // Open as a running plugin has it (this process stands in for one).
    ledger::LedgerOptions o;
    o.dir = dir.path();
    o.boot_id = "boot-1";
    auto plugin = std::move(ledger::ClaimLedger::Open(o)).value();
    CtlRun r = Nvdractl(cmd);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("refusing to retire the ledger: a plugin has the ledger in " + dir.path() + " open"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("stop the plugin first"), std::string::npos) << r.out;
    EXPECT_TRUE(PathExists(JoinPath(dir.path(), ledger::kLogFileName)));
    EXPECT_FALSE(PathExists(cp)) << "nothing is written that the plugin would import";
    // The plugin goes on recording claims in the same ledger.
    ASSERT_TRUE(plugin->BeginPrepare(Request("uid-c", {"gpu-2"})).ok());
    // A read-only export beside the running plugin is fine.
    CtlRun read_only = Nvdractl("ledger export-upstream " + dir.path() + " --boot-id-file " + boot + " --output " +
                                JoinPath(dir.path(), "copy.json"));
    EXPECT_EQ(read_only.exit_code, 0) << read_only.out;
  }
  // Once the plugin is gone, the rollback goes through.
  CtlRun r = Nvdractl(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(PathExists(JoinPath(dir.path(), ledger::kLogFileName)));
  EXPECT_TRUE(PathExists(cp));
}

}  // namespace
}  // namespace nvdra::ctl
