// `nvdractl ledger export-upstream --target`: the checkpoint each release of
// the Go driver accepts, and the CDI specs handed over under its names.
//
// The Go driver verifies a checkpoint by decoding it into its structs and
// checksumming what encoding/json marshals from them, so a file is accepted
// only if it is a fixed point of that decode and marshal. This test writes
// those structs' rules out for each release (field order, omitempty, the
// fields each release knows) and checks the export against them, with the
// checksum computed here over the re-marshalled bytes.
#include <cctype>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cdi/cdi_spec_writer.h"
#include "cmd/nvdractl/nvdractl_test_util.h"
#include "config/yaml_to_json.h"
#include "ledger/claim_ledger.h"
#include "ledger/ledger_test_util.h"
#include "ledger/legacy_checkpoint.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::ctl {
namespace {

using oj = nlohmann::ordered_json;
using ::nvdra::testing::TempDir;
using testing::CtlRun;
using testing::Nvdractl;

enum class Release { kV25_12_0, kV0_4_0, kV0_4_1, kMain };

const char* Name(Release r) {
  switch (r) {
    case Release::kV25_12_0: return "v25.12.0";
    case Release::kV0_4_0: return "v0.4.0";
    case Release::kV0_4_1: return "v0.4.1";
    case Release::kMain: return "main";
  }
  return "";
}

// checksum.New: FNV-1a 32 over spew's dump of the []byte.
uint32_t Checksum(const std::string& s) {
  std::string dump = "([]uint8)[";
  for (size_t i = 0; i < s.size(); ++i) dump += (i ? " " : "") + std::to_string(static_cast<unsigned char>(s[i]));
  dump += "]";
  uint32_t h = 2166136261u;
  for (unsigned char c : dump) h = (h ^ c) * 16777619u;
  return h;
}

// encoding/json's decode: an exact key first, else one that differs in case.
const oj* Field(const oj& o, const std::string& name) {
  if (!o.is_object()) return nullptr;
  auto exact = o.find(name);
  if (exact != o.end()) return &*exact;
  for (auto it = o.begin(); it != o.end(); ++it) {
    const std::string& k = it.key();
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(),
                                              [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return &it.value();
    }
  }
  return nullptr;
}
bool Present(const oj* v) { return v != nullptr && !v->is_null(); }
oj StrOr(const oj* v) { return Present(v) ? *v : oj(""); }
oj OrNull(const oj* v) { return Present(v) ? *v : oj(nullptr); }
// omitempty: false, 0, "", nil, and empty slices and maps are left out.
bool Empty(const oj& v) {
  return v.is_null() || (v.is_string() && v.get<std::string>().empty()) || (v.is_boolean() && !v.get<bool>()) ||
         ((v.is_array() || v.is_object()) && v.empty()) || (v.is_number() && v == 0);
}

// CheckpointedDevice: kubeletplugin.Device's four fields up to v25.12.0; from
// v0.4.0 a marshaller of its own adds ShareID and Metadata, omitempty.
oj Device(const oj* d, Release r) {
  if (!Present(d)) return nullptr;
  oj out = oj::object();
  out["Requests"] = OrNull(Field(*d, "Requests"));
  out["PoolName"] = StrOr(Field(*d, "PoolName"));
  out["DeviceName"] = StrOr(Field(*d, "DeviceName"));
  out["CDIDeviceIDs"] = OrNull(Field(*d, "CDIDeviceIDs"));
  if (r >= Release::kV0_4_0) {
    if (Present(Field(*d, "ShareID"))) out["ShareID"] = *Field(*d, "ShareID");
    if (Present(Field(*d, "Metadata"))) out["Metadata"] = *Field(*d, "Metadata");
  }
  return out;
}

oj Member(const oj* m, const char* info_key, Release r) {
  if (!Present(m)) return nullptr;
  oj out = oj::object();
  out[info_key] = OrNull(Field(*m, info_key));  // GpuInfo{uuid}, MigLiveTuple: kept as they are here
  out["device"] = Device(Field(*m, "device"), r);
  return out;
}

// DeviceConfigState, release by release.
oj ConfigState(const oj* c, Release r) {
  oj in = Present(c) ? *c : oj::object();
  oj out = oj::object();
  oj id = StrOr(Field(in, "mpsControlDaemonID"));
  if (r != Release::kMain || !Empty(id)) out["mpsControlDaemonID"] = id;
  if (r == Release::kMain && Present(Field(in, "mpsApplied"))) out["mpsApplied"] = *Field(in, "mpsApplied");
  if (r >= Release::kV0_4_1 && Present(Field(in, "timeSliceApplied"))) {
    out["timeSliceApplied"] = *Field(in, "timeSliceApplied");
  }
  return out;
}

oj Groups(const oj* groups, Release r) {
  if (!Present(groups)) return nullptr;
  oj out = oj::array();
  for (const auto& g : *groups) {
    oj group = oj::object();
    const oj* devices = Field(g, "devices");
    if (!Present(devices)) {
      group["devices"] = nullptr;
    } else {
      group["devices"] = oj::array();
      for (const auto& d : *devices) {
        oj dev = oj::object();
        dev["gpu"] = Member(Field(d, "gpu"), "info", r);
        dev["mig"] = Member(Field(d, "mig"), "concrete", r);
        oj vfio = Member(Field(d, "vfio"), "info", r);
        if (!vfio.is_null()) dev["vfio"] = vfio;
        group["devices"].push_back(dev);
      }
    }
    group["configState"] = ConfigState(Field(g, "configState"), r);
    out.push_back(group);
  }
  return out;
}

// PreparedClaimV2 / V1. The status (ResourceClaimStatus) has the same type
// in every release and is kept as it is.
oj Claim(const oj& c, Release r, bool v1) {
  oj out = oj::object();
  if (!v1) out["checkpointState"] = StrOr(Field(c, "checkpointState"));
  out["status"] = Present(Field(c, "status")) ? *Field(c, "status") : oj::object();
  oj groups = Groups(Field(c, "preparedDevices"), r);
  if (!Empty(groups)) out["preparedDevices"] = groups;
  if (v1) return out;
  if (!Empty(StrOr(Field(c, "name")))) out["name"] = *Field(c, "name");
  if (!Empty(StrOr(Field(c, "namespace")))) out["namespace"] = *Field(c, "namespace");
  return out;
}

// Go's maps marshal with sorted keys.
oj Claims(const oj* claims, Release r, bool v1) {
  std::map<std::string, oj> sorted;
  if (Present(claims)) {
    for (auto it = claims->begin(); it != claims->end(); ++it) sorted[it.key()] = Claim(it.value(), r, v1);
  }
  oj out = oj::object();
  for (auto& [k, v] : sorted) out[k] = v;
  return out;
}

// What `r` decodes from `file` and marshals again (MarshalCheckpoint: V1 =
// V2.ToV1(), checksums over the structs with checksum 0), and whether the
// checksums it finds in the file are those it computes (VerifyChecksum).
struct Remarshalled {
  std::string text;
  bool checksums_verify = false;
};
Remarshalled Remarshal(const std::string& file, Release r) {
  oj doc = oj::parse(file);
  const oj* v2 = Field(doc, "v2");
  oj v2_out = oj::object();
  v2_out["checksum"] = 0;
  oj claims = Claims(Present(v2) ? Field(*v2, "preparedClaims") : nullptr, r, false);
  if (!claims.empty()) v2_out["preparedClaims"] = claims;
  if (r >= Release::kV0_4_0 && Present(v2) && !Empty(StrOr(Field(*v2, "nodeBootID")))) {
    v2_out["nodeBootID"] = *Field(*v2, "nodeBootID");
  }
  uint32_t c2 = Checksum(v2_out.dump());
  v2_out["checksum"] = c2;
  // The v1 section as this release decodes it from the file.
  const oj* v1 = Field(doc, "v1");
  oj v1_in = oj::object();
  oj v1_claims = Claims(Present(v1) ? Field(*v1, "preparedClaims") : nullptr, r, true);
  if (!v1_claims.empty()) v1_in["preparedClaims"] = v1_claims;
  uint32_t c1_in = Checksum("{\"checksum\":0,\"v1\":" + v1_in.dump() + "}");
  // ToV1 of the v2 claims: the completed ones, without state or names.
  oj v1_out = oj::object(), from_v2 = oj::object();
  for (auto it = claims.begin(); it != claims.end(); ++it) {
    if (it.value()["checkpointState"] != "PrepareCompleted") continue;
    oj c = it.value();
    c.erase("checkpointState");
    c.erase("name");
    c.erase("namespace");
    from_v2[it.key()] = c;
  }
  if (!from_v2.empty()) v1_out["preparedClaims"] = from_v2;
  uint32_t c1 = Checksum("{\"checksum\":0,\"v1\":" + v1_out.dump() + "}");
  oj out = oj::object();
  out["checksum"] = c1;
  out["v1"] = v1_out;
  out["v2"] = v2_out;
  const oj* stored_v2 = Present(v2) ? Field(*v2, "checksum") : nullptr;
  Remarshalled res;
  res.text = out.dump();
  res.checksums_verify = Present(Field(doc, "checksum")) && *Field(doc, "checksum") == c1_in && Present(stored_v2) &&
                         *stored_v2 == c2;
  return res;
}

const char* kImported = "7a4e1a8e-0000-4000-8000-000000000001";
const char* kNative = "7a4e1a8e-0000-4000-8000-000000000002";
const char* kStarted = "7a4e1a8e-0000-4000-8000-000000000003";

// A ledger holding a claim imported from upstream main's checkpoint (an MPS
// and time-slice state, no daemon id, a shared device), a completed native
// claim holding a share of gpu-1, and a native claim half prepared.
void MakeLedger(const std::string& dir) {
  std::string claim =
      std::string(
          R"({"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0","shareID":"5e6f0000-0000-4000-8000-0000000000aa"}]}}},"preparedDevices":[{"devices":[{"gpu":{"info":{"uuid":"GPU-1"},"device":{"Requests":["gpu"],"PoolName":"node-a","DeviceName":"gpu-0","CDIDeviceIDs":["k8s.gpu.nvidia.com/claim=)") +
      kImported +
      R"(-gpu-0"],"ShareID":"5e6f0000-0000-4000-8000-0000000000aa"}},"mig":null}],"configState":{"mpsApplied":true,"timeSliceApplied":false}}],"name":"c1","namespace":"default"})";
  ASSERT_TRUE(WriteFileAtomically(
                  JoinPath(dir, ledger::kLegacyCheckpointFileName),
                  ledger::testing::GoCheckpointFile("{\"" + std::string(kImported) + "\":" + claim + "}", "boot-1"))
                  .ok());
  ledger::LedgerOptions o;
  o.dir = dir;
  o.boot_id = "boot-1";
  auto l = std::move(ledger::ClaimLedger::Open(o)).value();
  ASSERT_EQ(l->report().imported_legacy_claims, 1u) << l->report().Summary();
  auto req = ledger::testing::Request(kNative, {"gpu-1"});
  req.allocation[0].share_id = "5e6f0000-0000-4000-8000-0000000000bb";
  req.allocation[0].consumed_capacity = {{"memory", "40Gi"}, {"shares", "1"}};
  ASSERT_TRUE(l->BeginPrepare(req).ok());
  auto prepared = ledger::testing::Prepared(kNative, {"gpu-1"});
  prepared[0].share_id = "5e6f0000-0000-4000-8000-0000000000bb";
  ASSERT_TRUE(l->CompletePrepare(kNative, prepared, nullptr).ok());
  ASSERT_TRUE(l->BeginPrepare(ledger::testing::Request(kStarted, {"gpu-2"})).ok());
}

std::string Export(const std::string& dir, const std::string& boot, Release r, const std::string& extra = "") {
  std::string out = JoinPath(dir, std::string("checkpoint-") + Name(r) + ".json");
  CtlRun run = Nvdractl("ledger export-upstream " + dir + " --boot-id-file " + boot + " --output " + out +
                        " --target " + Name(r) + extra);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  auto text = ReadFileToString(out);
  return text.ok() ? *text : "";
}

oj GroupConfigState(const std::string& file, const char* uid) {
  return oj::parse(file)["v2"]["preparedClaims"][uid]["preparedDevices"][0]["configState"];
}
oj GroupDevice(const std::string& file, const char* uid) {
  return oj::parse(file)["v2"]["preparedClaims"][uid]["preparedDevices"][0]["devices"][0]["gpu"]["device"];
}

TEST(NvdractlExportTest, EachTargetGetsExactlyTheBytesItsReleaseMarshals) {
  TempDir dir{"nvdra-export"};
  MakeLedger(dir.path());
  std::string boot = JoinPath(dir.path(), "boot_id");
  ASSERT_TRUE(WriteFileAtomically(boot, "boot-1\n").ok());
  for (Release r : {Release::kV25_12_0, Release::kV0_4_0, Release::kV0_4_1, Release::kMain}) {
    SCOPED_TRACE(Name(r));
    std::string file = Export(dir.path(), boot, r);
    ASSERT_FALSE(file.empty());
    Remarshalled again = Remarshal(file, r);
    EXPECT_EQ(again.text, file) << "the release would re-marshal other bytes and refuse the file";
    EXPECT_TRUE(again.checksums_verify) << file;
    // Every claim that holds devices is there, the half-prepared one too.
    EXPECT_EQ(oj::parse(file)["v2"]["preparedClaims"].size(), 3u);
    // The share's consumedCapacity: the status type of every release has it.
    EXPECT_EQ(oj::parse(file)["v2"]["preparedClaims"][kNative]["status"]["allocation"]["devices"]["results"][0]
                             ["consumedCapacity"]
                                 .dump(),
              R"({"memory":"40Gi","shares":"1"})");
  }
  // What differs between them, spelled out.
  std::string v25 = Export(dir.path(), boot, Release::kV25_12_0, " --force");
  std::string v040 = Export(dir.path(), boot, Release::kV0_4_0, " --force");
  std::string v041 = Export(dir.path(), boot, Release::kV0_4_1, " --force");
  std::string main = Export(dir.path(), boot, Release::kMain, " --force");
  EXPECT_FALSE(oj::parse(v25)["v2"].contains("nodeBootID"));
  EXPECT_EQ(oj::parse(v041)["v2"]["nodeBootID"], "boot-1");
  EXPECT_FALSE(GroupDevice(v25, kImported).contains("ShareID"));
  EXPECT_EQ(GroupDevice(v041, kImported)["ShareID"], "5e6f0000-0000-4000-8000-0000000000aa");
  EXPECT_EQ(GroupDevice(main, kNative)["ShareID"], "5e6f0000-0000-4000-8000-0000000000bb");
  EXPECT_EQ(GroupConfigState(v25, kImported).dump(), R"({"mpsControlDaemonID":""})");
  EXPECT_EQ(GroupConfigState(v040, kImported).dump(), R"({"mpsControlDaemonID":""})");
  EXPECT_EQ(GroupConfigState(v041, kImported).dump(), R"({"mpsControlDaemonID":"","timeSliceApplied":false})");
  EXPECT_EQ(GroupConfigState(main, kImported).dump(), R"({"mpsApplied":true,"timeSliceApplied":false})");
  EXPECT_EQ(GroupConfigState(v041, kNative).dump(), R"({"mpsControlDaemonID":""})");
  EXPECT_EQ(GroupConfigState(main, kNative).dump(), "{}");
  // A file for one release is refused by the next: the reason --target exists.
  EXPECT_NE(Remarshal(v041, Release::kMain).text, v041);
  EXPECT_NE(Remarshal(main, Release::kV0_4_1).text, main);
  EXPECT_NE(Remarshal(v041, Release::kV25_12_0).text, v041);
  // The default is the latest release.
  CtlRun plain = Nvdractl("ledger export-upstream " + dir.path() + " --boot-id-file " + boot + " --output " +
                          JoinPath(dir.path(), "default.json"));
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_EQ(*ReadFileToString(JoinPath(dir.path(), "default.json")), v041);
  EXPECT_NE(plain.out.find("v0.4.1"), std::string::npos) << plain.out;
}

TEST(NvdractlExportTest, AnUnknownTargetIsRefusedNamingTheKnownOnes) {
  TempDir dir{"nvdra-export"};
  MakeLedger(dir.path());
  std::string boot = JoinPath(dir.path(), "boot_id");
  ASSERT_TRUE(WriteFileAtomically(boot, "boot-1\n").ok());
  CtlRun r = Nvdractl("ledger export-upstream " + dir.path() + " --boot-id-file " + boot + " --output " +
                      JoinPath(dir.path(), "x.json") + " --target v25.8.0");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("v25.12.0, v0.4.0, v0.4.1, main"), std::string::npos) << r.out;
  EXPECT_FALSE(PathExists(JoinPath(dir.path(), "x.json")));
}

TEST(NvdractlExportTest, RetiringTheLedgerHandsEachClaimSpecToTheGoDriversName) {
  TempDir dir{"nvdra-export"};
  TempDir cdi{"nvdra-export-cdi"};
  MakeLedger(dir.path());
  std::string boot = JoinPath(dir.path(), "boot_id");
  ASSERT_TRUE(WriteFileAtomically(boot, "boot-1\n").ok());
  const std::string prefix = JoinPath(cdi.path(), "k8s.gpu.nvidia.com-claim_");
  // Our spec of the native claim, with a value that only stays a string
  // quoted, and another driver's spec that must be left alone.
  std::string spec =
      std::string(R"({"cdiVersion":"0.5.0","kind":"k8s.gpu.nvidia.com/claim","devices":[{"name":")") + kNative +
      R"(-gpu-1","containerEdits":{"env":["NVIDIA_VISIBLE_DEVICES=1"],"deviceNodes":[{"path":"/dev/nvidia1","permissions":"rw"}],"mounts":[{"hostPath":"/usr/lib/libcuda.so.1","containerPath":"/usr/lib/libcuda.so.1","options":["ro","nosuid","nodev","bind"]}]}}],"containerEdits":{"env":["A=0666","B=true"],"hooks":[{"hookName":"createContainer","path":"/hook","args":["nvidia-cdi-hook","create-symlinks","--link","libcuda.so.1::/usr/lib/libcuda.so"]}]}})";
  ASSERT_TRUE(WriteFileAtomically(prefix + kNative + ".json", spec).ok());
  const std::string other = JoinPath(cdi.path(), "k8s.compute-domain.nvidia.com-claim_x.json");
  ASSERT_TRUE(WriteFileAtomically(other, "{}").ok());
  CtlRun r = Nvdractl("ledger export-upstream " + dir.path() + " --boot-id-file " + boot + " --retire-ledger" +
                      " --cdi-root " + cdi.path());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(PathExists(prefix + std::string(kNative) + ".json"));
  auto yaml = ReadFileToString(prefix + std::string(kNative) + ".yaml");
  ASSERT_TRUE(yaml.ok()) << r.out;
  // The Go driver's reader (and ours) finds the same devices in it.
  auto read = cdi::CdiSpecWriter::ParseClaimSpec(*yaml, /*yaml=*/true, kNative, "spec.yaml");
  ASSERT_TRUE(read.ok()) << read.status().message() << "\n" << *yaml;
  EXPECT_EQ(read->devices, std::vector<std::string>{"gpu-1"});
  // The same document, each value of the same type.
  EXPECT_EQ(nlohmann::json::parse(config::testing::YamlToJson(YAML::Load(*yaml))), nlohmann::json::parse(spec))
      << *yaml;
  // Strings stay strings.
  EXPECT_NE(yaml->find("- \"A=0666\""), std::string::npos) << *yaml;
  EXPECT_NE(yaml->find("\"permissions\": \"rw\""), std::string::npos) << *yaml;
  EXPECT_TRUE(PathExists(other));
  EXPECT_NE(r.out.find("1 CDI specs"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace nvdra::ctl
