#include "cdi/cdi_spec_writer.h"
#include "util/test_paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "cdi/testdata/golden.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::cdi {
namespace {

const std::string kUid = "0f3a7c2e-5b1d-4e8f-9a6b-1c2d3e4f5a6b";

class CdiSpecWriterTest : public ::testing::Test {
 protected:
  Spec GpuSpec(const CdiSpecWriter& w, const std::string& uid, int n) {
    std::vector<SpecDevice> devs;
    for (int i = n - 1; i >= 0; --i) {
      ContainerEdits e;
      e.device_nodes.push_back({.path = "/dev/nvidia" + std::to_string(i)});
      devs.push_back({"gpu-" + std::to_string(i), e});
    }
    ContainerEdits common;
    common.device_nodes.push_back({.path = "/dev/nvidiactl"});
    return w.BuildClaimSpec(uid, devs, common);
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-cdi"};
  std::string root_ = tmp_.path() + "/cdi";
};

TEST_F(CdiSpecWriterTest, NamesFollowUpstreamConvention) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  EXPECT_EQ(w.Kind(), "k8s.gpu.nvidia.com/claim");
  EXPECT_EQ(w.DeviceId(kUid, "gpu-0"), "k8s.gpu.nvidia.com/claim=" + kUid + "-gpu-0");
  auto p = w.ClaimSpecPath(kUid);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, root_ + "/k8s.gpu.nvidia.com-claim_" + kUid + ".json");
  CdiSpecWriter cd(root_, "k8s.compute-domain.nvidia.com");
  EXPECT_EQ(cd.DeviceId(kUid, "channel-0"), "k8s.compute-domain.nvidia.com/claim=" + kUid + "-channel-0");
}

TEST_F(CdiSpecWriterTest, RejectsUnsafeUids) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  for (const std::string& uid :
       std::vector<std::string>{"", "../etc", "a/b", "..", ".hidden", "a b", std::string(200, 'a')}) {
    EXPECT_FALSE(w.ClaimSpecPath(uid).ok()) << uid;
    EXPECT_FALSE(w.WriteClaimSpec(uid, GpuSpec(w, "x", 1)).ok()) << uid;
    EXPECT_FALSE(w.RemoveClaimSpec(uid).ok()) << uid;
  }
  EXPECT_FALSE(PathExists(root_)) << "nothing may be created for a rejected claim";
}

TEST_F(CdiSpecWriterTest, WritesGoldenFileWithMode0644AndSortedDevices) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  Spec spec = GpuSpec(w, kUid, 2);
  ASSERT_EQ(spec.devices[0].name, kUid + "-gpu-0");
  ASSERT_TRUE(w.WriteClaimSpec(kUid, spec).ok());
  std::string path = *w.ClaimSpecPath(kUid);
  auto content = ReadFileToString(path);
  ASSERT_TRUE(content.ok());
  nvdra::testing::ExpectMatchesGolden(std::string(NVDRA_SOURCE_DIR) + "/src/cdi/testdata/claim_two_gpus.json",
                                      *content);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  auto y = YAML::Load(*content);
  EXPECT_EQ(y["cdiVersion"].as<std::string>(), "0.5.0");  // UID starts with a digit
  EXPECT_EQ(y["devices"].size(), 2u);
}

TEST_F(CdiSpecWriterTest, RewriteRecreatesMissingFileAndIsIdempotent) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  Spec spec = GpuSpec(w, kUid, 1);
  ASSERT_TRUE(w.WriteClaimSpec(kUid, spec).ok());
  std::string path = *w.ClaimSpecPath(kUid);
  std::string first = *ReadFileToString(path);
  ASSERT_TRUE(w.WriteClaimSpec(kUid, spec).ok());
  EXPECT_EQ(*ReadFileToString(path), first);
  // A reboot empties the tmpfs directory, root included.
  std::filesystem::remove_all(root_);
  ASSERT_TRUE(w.WriteClaimSpec(kUid, spec).ok());
  EXPECT_EQ(*ReadFileToString(path), first);
  auto names = ListDirectory(root_);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 1u) << "no temp file may be left behind";
}

TEST_F(CdiSpecWriterTest, WritingAClaimSpecReplacesTheUpstreamYamlOfThatClaim) {
  // The upstream driver's spec of a claim prepared before an upgrade names the
  // same CDI devices; both files side by side make every device conflicting.
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  ASSERT_TRUE(w.EnsureRoot().ok());
  const std::string legacy = root_ + "/k8s.gpu.nvidia.com-claim_" + kUid + ".yaml";
  const std::string other = root_ + "/k8s.gpu.nvidia.com-claim_bbbb-2.yaml";
  ASSERT_TRUE(WriteFileAtomically(legacy, "x").ok());
  ASSERT_TRUE(WriteFileAtomically(other, "x").ok());
  Spec spec = GpuSpec(w, kUid, 1);
  ASSERT_TRUE(w.WriteClaimSpec(kUid, spec).ok());
  EXPECT_TRUE(PathExists(*w.ClaimSpecPath(kUid)));
  EXPECT_FALSE(PathExists(legacy));
  EXPECT_TRUE(PathExists(other)) << "another claim's spec is not ours to touch";
  // Also when our file already holds the same bytes.
  ASSERT_TRUE(WriteFileAtomically(legacy, "x").ok());
  ASSERT_TRUE(w.WriteClaimSpec(kUid, spec).ok());
  EXPECT_FALSE(PathExists(legacy));
}

// As the Go driver writes a claim's spec (CDI's WriteSpec: YAML, "---" first).
std::string GoClaimSpec(const std::string& uid) {
  return "---\ncdiVersion: 0.5.0\nkind: k8s.gpu.nvidia.com/claim\ndevices:\n"
         "- name: " +
         uid +
         "-gpu-1\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia1\n"
         "- name: 7\n"
         "- name: " +
         uid +
         "-gpu-0\n  containerEdits:\n    env:\n    - NVIDIA_VISIBLE_DEVICES=void\n"
         "containerEdits:\n  deviceNodes:\n  - path: /dev/nvidiactl\n";
}

TEST_F(CdiSpecWriterTest, AFifoADeviceOrAHugeFilePlantedAsASpecIsRefusedWithoutHangingOrReadingIt) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  ASSERT_TRUE(w.EnsureRoot().ok());
  const std::string path = *w.ClaimSpecPath(kUid);
  // A FIFO no one writes: a blocking open would hang recovery forever.
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  auto r = w.ClaimSpecDevices(kUid);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "refusing to read " + path + ": it is a FIFO, not a regular file");
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
  EXPECT_NE(w.ClaimSpecDevices(kUid).status().message().find("a character device"), std::string::npos);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  // 2 GiB (sparse): refused from its size, before a byte is read.
  ASSERT_TRUE(WriteFileAtomically(path, "{}").ok());
  ASSERT_EQ(::truncate(path.c_str(), off_t{2} << 30), 0);
  EXPECT_NE(w.ClaimSpecDevices(kUid).status().message().find("it is 2147483648 bytes long, over the limit of 4194304"),
            std::string::npos);
}

TEST_F(CdiSpecWriterTest, ClaimSpecDevicesReadsOursAndTheGoDriversYamlSpec) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  ASSERT_TRUE(w.EnsureRoot().ok());
  EXPECT_EQ(w.ClaimSpecDevices(kUid).status().code(), StatusCode::kNotFound);
  const std::string legacy = root_ + "/k8s.gpu.nvidia.com-claim_" + kUid + ".yaml";
  ASSERT_TRUE(WriteFileAtomically(legacy, GoClaimSpec(kUid)).ok());
  auto devices = w.ClaimSpecDevices(kUid);
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  EXPECT_EQ(*devices, (std::vector<std::string>{"gpu-1", "gpu-0"})) << "file order; a number is no device name";
  // Ours wins when both are there.
  ASSERT_TRUE(WriteFileAtomically(*w.ClaimSpecPath(kUid),
                                  nlohmann::json{{"devices", {{{"name", kUid + "-gpu-5"}}}}}.dump())
                  .ok());
  EXPECT_EQ(*w.ClaimSpecDevices(kUid), std::vector<std::string>{"gpu-5"});
  ASSERT_TRUE(RemoveFileIfExists(*w.ClaimSpecPath(kUid)).ok());
  // What is not a spec is an error that says so, never a crash.
  for (const std::string& bad :
       std::vector<std::string>{"[a, b", "- just\n- a list\n", std::string(5000, '['), std::string(5000, ' ') + "x"}) {
    ASSERT_TRUE(WriteFileAtomically(legacy, bad).ok());
    auto r = w.ClaimSpecDevices(kUid);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad.substr(0, 20);
    EXPECT_NE(r.status().message().find(legacy), std::string::npos) << r.status().message();
  }
}

// A spec names its claim in a variable of its own UID (a 0.5.0 spec has no
// other place for it), so a ledger rebuilt from it can ask the API server.
// A copy under another UID, a spec without the variable, or a variable of
// the wrong shape names nothing.
TEST_F(CdiSpecWriterTest, AClaimSpecNamesItsClaimAndReadsItBack) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  ASSERT_TRUE(w.EnsureRoot().ok());
  EXPECT_EQ(CdiSpecWriter::ClaimRefEnv("0b1c-22"), "NVDRA_CLAIM_0b1c_22");
  Spec spec = w.BuildClaimSpec(kUid, {{"gpu-0", {}}}, {}, "team-a", "train");
  spec.devices[0].edits.env = {"X=1"};
  ASSERT_TRUE(ValidateSpec(spec).ok());
  EXPECT_EQ(spec.edits.env, std::vector<std::string>{CdiSpecWriter::ClaimRefEnv(kUid) + "=team-a/train"});
  ASSERT_TRUE(w.WriteClaimSpec(kUid, spec).ok());
  auto read = w.ReadClaimSpec(kUid);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->devices, std::vector<std::string>{"gpu-0"});
  EXPECT_EQ(read->ns, "team-a");
  EXPECT_EQ(read->name, "train");

  const std::string other = "11111111-2222-3333-4444-555555555555";
  auto text = ReadFileToString(*w.ClaimSpecPath(kUid));
  ASSERT_TRUE(text.ok());
  ASSERT_TRUE(WriteFileAtomically(*w.ClaimSpecPath(other), *text).ok());
  auto copy = w.ReadClaimSpec(other);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->name, "") << "the variable names another UID";
  EXPECT_TRUE(copy->devices.empty());

  for (const std::string& value : {std::string("no-slash"), std::string("ns/"), std::string("")}) {
    Spec odd = w.BuildClaimSpec(kUid, {{"gpu-0", {}}});
    odd.devices[0].edits.env = {"X=1"};
    odd.edits.env = {CdiSpecWriter::ClaimRefEnv(kUid) + "=" + value};
    ASSERT_TRUE(w.WriteClaimSpec(kUid, odd).ok());
    auto r = w.ReadClaimSpec(kUid);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->name, "") << value;
    EXPECT_EQ(r->devices, std::vector<std::string>{"gpu-0"});
  }
  Spec unnamed = w.BuildClaimSpec(kUid, {{"gpu-0", {}}});
  EXPECT_TRUE(unnamed.edits.env.empty());
}

TEST_F(CdiSpecWriterTest, RejectsSpecOfOtherKindOrClaim) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  CdiSpecWriter cd(root_, "k8s.compute-domain.nvidia.com");
  EXPECT_FALSE(w.WriteClaimSpec(kUid, GpuSpec(cd, kUid, 1)).ok());
  EXPECT_FALSE(w.WriteClaimSpec(kUid, GpuSpec(w, "1111", 1)).ok());
}

TEST_F(CdiSpecWriterTest, RemoveAndListAndSweepOnlyOurFiles) {
  CdiSpecWriter gpu(root_, "k8s.gpu.nvidia.com");
  CdiSpecWriter cd(root_, "k8s.compute-domain.nvidia.com");
  const std::string a = "aaaa-1", b = "bbbb-2", c = "cccc-3";
  ASSERT_TRUE(gpu.WriteClaimSpec(a, GpuSpec(gpu, a, 1)).ok());
  ASSERT_TRUE(gpu.WriteClaimSpec(b, GpuSpec(gpu, b, 1)).ok());
  ASSERT_TRUE(cd.WriteClaimSpec(c, GpuSpec(cd, c, 1)).ok());
  // A spec left by the upstream driver (.yaml) and unrelated files.
  ASSERT_TRUE(WriteFileAtomically(root_ + "/k8s.gpu.nvidia.com-claim_dddd-4.yaml", "x").ok());
  ASSERT_TRUE(WriteFileAtomically(root_ + "/nvidia.yaml", "x").ok());
  ASSERT_TRUE(WriteFileAtomically(root_ + "/k8s.gpu.nvidia.com-claim_..json", "x").ok());

  auto uids = gpu.ListClaimSpecUids();
  ASSERT_TRUE(uids.ok());
  EXPECT_EQ(*uids, (std::vector<std::string>{a, b, "dddd-4"}));
  EXPECT_EQ(*cd.ListClaimSpecUids(), (std::vector<std::string>{c}));

  ASSERT_TRUE(gpu.RemoveClaimSpec(a).ok());
  ASSERT_TRUE(gpu.RemoveClaimSpec(a).ok()) << "removing twice is fine";
  ASSERT_TRUE(gpu.RemoveClaimSpec("dddd-4").ok());
  EXPECT_EQ(*gpu.ListClaimSpecUids(), (std::vector<std::string>{b}));
  EXPECT_TRUE(PathExists(root_ + "/nvidia.yaml"));
}

TEST_F(CdiSpecWriterTest, SweepRemovesOrphansAndStaleTempFiles) {
  CdiSpecWriter gpu(root_, "k8s.gpu.nvidia.com");
  CdiSpecWriter cd(root_, "k8s.compute-domain.nvidia.com");
  for (const std::string uid : {"aaaa-1", "bbbb-2", "cccc-3"}) {
    ASSERT_TRUE(gpu.WriteClaimSpec(uid, GpuSpec(gpu, uid, 1)).ok());
  }
  ASSERT_TRUE(cd.WriteClaimSpec("dddd-4", GpuSpec(cd, "dddd-4", 1)).ok());
  const std::string tmp = root_ + "/.k8s.gpu.nvidia.com-claim_eeee-5.json.tmp-123";
  ASSERT_TRUE(WriteFileAtomically(tmp, "{").ok());
  const std::string live_tmp = root_ + "/.k8s.gpu.nvidia.com-claim_bbbb-2.json.tmp-456";
  ASSERT_TRUE(WriteFileAtomically(live_tmp, "{").ok());
  auto removed = gpu.SweepOrphanClaimSpecs([](const std::string& uid) { return uid == "bbbb-2"; });
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, (std::vector<std::string>{"aaaa-1", "cccc-3"}));
  EXPECT_EQ(*gpu.ListClaimSpecUids(), (std::vector<std::string>{"bbbb-2"}));
  EXPECT_EQ(*cd.ListClaimSpecUids(), (std::vector<std::string>{"dddd-4"})) << "other vendors are not ours";
  EXPECT_FALSE(PathExists(tmp));
  EXPECT_TRUE(PathExists(live_tmp)) << "may be a write in flight for a known claim";
}

TEST_F(CdiSpecWriterTest, ModeIs0644WhateverTheUmask) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  mode_t old = ::umask(077);
  Status s = w.WriteClaimSpec(kUid, GpuSpec(w, kUid, 1));
  ::umask(old);
  ASSERT_TRUE(s.ok());
  struct stat st;
  ASSERT_EQ(::stat(w.ClaimSpecPath(kUid)->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(CdiSpecWriterTest, ListOfMissingRootIsEmpty) {
  CdiSpecWriter w(root_ + "/nope", "k8s.gpu.nvidia.com");
  auto uids = w.ListClaimSpecUids();
  ASSERT_TRUE(uids.ok());
  EXPECT_TRUE(uids->empty());
}

// A regular file where the CDI directory belongs (a mistaken hostPath, a
// stray copy) must not keep the plugin from starting: it is set aside, with
// an error in the log, and the directory created.
TEST_F(CdiSpecWriterTest, RootThatIsAFileIsSetAsideAndTheWriterRecovers) {
  ASSERT_TRUE(WriteFileAtomically(root_, "x").ok());
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  Status s = w.EnsureRoot();
  ASSERT_TRUE(s.ok()) << s.ToString();
  struct stat st;
  ASSERT_EQ(::stat(root_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  auto names = ListDirectory(tmp_.path());
  ASSERT_TRUE(names.ok());
  std::string aside;
  for (const auto& n : *names) {
    if (n.starts_with("cdi.not-a-directory-")) aside = n;
  }
  ASSERT_FALSE(aside.empty());
  EXPECT_EQ(*ReadFileToString(tmp_.path() + "/" + aside), "x");
  EXPECT_TRUE(w.WriteClaimSpec(kUid, GpuSpec(w, kUid, 1)).ok());
  // The same happens when it turns up later, at a write.
  std::filesystem::remove_all(root_);
  ASSERT_TRUE(WriteFileAtomically(root_, "y").ok());
  EXPECT_TRUE(w.WriteClaimSpec(kUid, GpuSpec(w, kUid, 1)).ok());
}

// Temp files a crash left between create and rename are swept at start,
// also those of a claim the ledger knows, once no write can still be in flight.
TEST_F(CdiSpecWriterTest, EnsureRootSweepsTempFilesACrashLeftBehind) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  ASSERT_TRUE(w.WriteClaimSpec(kUid, GpuSpec(w, kUid, 1)).ok());
  const std::string old_tmp = root_ + "/.k8s.gpu.nvidia.com-claim_" + kUid + ".json.tmp-123";
  const std::string fresh_tmp = root_ + "/.k8s.gpu.nvidia.com-claim_" + kUid + ".json.tmp-456";
  const std::string other_vendor = root_ + "/.k8s.other.example.com-claim_" + kUid + ".json.tmp-789";
  for (const auto& p : {old_tmp, fresh_tmp, other_vendor}) ASSERT_TRUE(WriteFileAtomically(p, "{").ok());
  struct timeval old_times[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimes(old_tmp.c_str(), old_times), 0);
  ASSERT_EQ(::utimes(other_vendor.c_str(), old_times), 0);
  ASSERT_TRUE(w.EnsureRoot().ok());
  EXPECT_FALSE(PathExists(old_tmp));
  EXPECT_TRUE(PathExists(fresh_tmp)) << "may be a write in flight";
  EXPECT_TRUE(PathExists(other_vendor)) << "not ours";
  EXPECT_TRUE(PathExists(*w.ClaimSpecPath(kUid)));
  // The reconciler's sweep removes it too, whether the claim is known or not.
  ASSERT_EQ(::utimes(fresh_tmp.c_str(), old_times), 0);
  ASSERT_TRUE(w.SweepOrphanClaimSpecs([](const std::string&) { return true; }).ok());
  EXPECT_FALSE(PathExists(fresh_tmp));
}

// A reader polling the final name while specs are rewritten must only ever
// see a complete spec (old or new), never a partial one.
TEST_F(CdiSpecWriterTest, NoPartialFileIsEverVisible) {
  CdiSpecWriter w(root_, "k8s.gpu.nvidia.com");
  Spec small = GpuSpec(w, kUid, 1);
  Spec large = GpuSpec(w, kUid, 64);
  const std::string s1 = RenderJson(small), s2 = RenderJson(large);
  ASSERT_TRUE(w.WriteClaimSpec(kUid, small).ok());
  std::string path = *w.ClaimSpecPath(kUid);
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, bad{0};
  std::thread reader([&] {
    while (!done.load() || reads.load() < 50) {
      auto c = ReadFileToString(path);
      if (!c.ok() || (*c != s1 && *c != s2)) bad++;
      reads++;
    }
  });
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(w.WriteClaimSpec(kUid, i % 2 ? small : large).ok());
  }
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GE(reads.load(), 50);
}

}  // namespace
}  // namespace nvdra::cdi
