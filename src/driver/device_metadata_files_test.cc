#include "driver/device_metadata_files.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::driver {
namespace {

constexpr const char* kUid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
constexpr const char* kOtherUid = "11111111-2222-3333-4444-555555555555";

class DeviceMetadataFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    files_ = std::make_unique<DeviceMetadataFiles>("gpu.nvidia.com", dir_ + "/plugin", dir_ + "/cdi");
  }
  static MetadataClaim Plain() { return {kUid, "team-a", "shared-gpu", std::nullopt}; }
  static MetadataClaim FromTemplate() { return {kUid, "team-a", "pod-gpu-x7k2q", std::string("gpu")}; }
  std::string Read(const std::string& path) {
    auto text = ReadFileToString(path);
    EXPECT_TRUE(text.ok()) << path << ": " << text.status().ToString();
    return text.ok() ? *text : "";
  }

  nvdra::testing::TempDir tmp_;
  std::string dir_;
  std::unique_ptr<DeviceMetadataFiles> files_;
};

// Byte for byte what Go's PrettySerializer writes for v1alpha1, followed by
// the stream's newline: kind before apiVersion, creationTimestamp omitted,
// attribute keys sorted, '<' '>' '&' escaped as Go escapes them.
TEST_F(DeviceMetadataFilesTest, FileMatchesUpstreamEncoding) {
  MetadataDevice vfio{"node-1", "gpu-vfio-0", {}};
  vfio.attributes["type"] = std::string("vfio");
  vfio.attributes["productName"] = std::string("H100 <SXM> & co");
  vfio.attributes["index"] = int64_t{0};
  vfio.attributes["addressingMode"] = model::IntList{{1, 2}};
  vfio.attributes["driverVersion"] = model::Version{"580.65.6"};
  vfio.attributes["resource.kubernetes.io/pciBusID"] = std::string("0000:1b:00.0");
  vfio.attributes["passthrough"] = true;
  MetadataDevice plain{"node-1", "gpu-1", {}};
  const char* want = R"({
  "kind": "DeviceMetadata",
  "apiVersion": "metadata.resource.k8s.io/v1alpha1",
  "metadata": {
    "name": "pod-gpu-x7k2q",
    "namespace": "team-a",
    "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    "generation": 1
  },
  "podClaimName": "gpu",
  "requests": [
    {
      "name": "gpus/passthrough",
      "devices": [
        {
          "driver": "gpu.nvidia.com",
          "pool": "node-1",
          "name": "gpu-vfio-0",
          "attributes": {
            "addressingMode": {
              "ints": [
                1,
                2
              ]
            },
            "driverVersion": {
              "version": "580.65.6"
            },
            "index": {
              "int": 0
            },
            "passthrough": {
              "bool": true
            },
            "productName": {
              "string": "H100 \u003cSXM\u003e \u0026 co"
            },
            "resource.kubernetes.io/pciBusID": {
              "string": "0000:1b:00.0"
            },
            "type": {
              "string": "vfio"
            }
          }
        },
        {
          "driver": "gpu.nvidia.com",
          "pool": "node-1",
          "name": "gpu-1"
        }
      ]
    }
  ]
}
)";
  EXPECT_EQ(files_->RenderFile(FromTemplate(), "gpus/passthrough", {vfio, plain}), want);
}

TEST_F(DeviceMetadataFilesTest, PlainClaimHasNoPodClaimName) {
  std::string text = files_->RenderFile(Plain(), "gpu", {{"node-1", "gpu-0", {}}});
  auto j = nlohmann::json::parse(text);
  EXPECT_FALSE(j.contains("podClaimName")) << text;
  EXPECT_EQ(j["metadata"]["name"], "shared-gpu");
  EXPECT_EQ(j["requests"][0]["name"], "gpu");
  EXPECT_FALSE(j["requests"][0]["devices"][0].contains("attributes"));
}

TEST_F(DeviceMetadataFilesTest, PathsFollowUpstreamLayout) {
  EXPECT_EQ(files_->FilePath("team-a", "shared-gpu", "gpu"),
            dir_ + "/plugin/dra-device-metadata/team-a_shared-gpu/gpu/metadata.json");
  EXPECT_EQ(files_->SpecPath(kUid, "gpu"), dir_ + "/cdi/gpu.nvidia.com_metadata_" + std::string(kUid) + "_gpu.json");
  EXPECT_EQ(files_->DeviceId(kUid, "gpu"), "gpu.nvidia.com/metadata=" + std::string(kUid) + "_gpu");
  EXPECT_EQ(files_->ContainerPath(Plain(), "gpu"),
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/shared-gpu/gpu/gpu.nvidia.com-metadata.json");
  EXPECT_EQ(files_->ContainerPath(FromTemplate(), "gpu"),
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/"
            "gpu.nvidia.com-metadata.json");
  EXPECT_EQ(BaseRequest("gpus/passthrough"), "gpus");
  EXPECT_EQ(BaseRequest("gpus"), "gpus");
}

// A subrequest writes under its base request and names itself inside; the
// spec bind-mounts the host file read-only at the container path.
TEST_F(DeviceMetadataFilesTest, WriteSubrequestUnderBaseRequest) {
  auto id = files_->Write(FromTemplate(), "gpus/passthrough", {{"node-1", "gpu-vfio-0", {}}});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, "gpu.nvidia.com/metadata=" + std::string(kUid) + "_gpus");
  const std::string file = files_->FilePath("team-a", "pod-gpu-x7k2q", "gpus");
  EXPECT_EQ(Read(file), files_->RenderFile(FromTemplate(), "gpus/passthrough", {{"node-1", "gpu-vfio-0", {}}}));
  auto spec = nlohmann::json::parse(Read(files_->SpecPath(kUid, "gpus")));
  EXPECT_EQ(spec["kind"], "gpu.nvidia.com/metadata");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], std::string(kUid) + "_gpus");
  const auto& mount = spec["devices"][0]["containerEdits"]["mounts"][0];
  EXPECT_EQ(mount["hostPath"], file);
  EXPECT_EQ(mount["containerPath"], files_->ContainerPath(FromTemplate(), "gpus"));
  EXPECT_EQ(mount["options"], nlohmann::json({"ro", "bind"}));
  struct stat st;
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(DeviceMetadataFilesTest, WriteRefusesNamesThatLeaveTheDirectory) {
  MetadataClaim bad = Plain();
  bad.name = "..";
  EXPECT_EQ(files_->Write(bad, "gpu", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(files_->Write(Plain(), "../gpu", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(PathExists(files_->Root()));
}

TEST_F(DeviceMetadataFilesTest, RemoveTakesFilesSpecsAndEmptyClaimDir) {
  ASSERT_TRUE(files_->Write(Plain(), "a", {{"node-1", "gpu-0", {}}}).ok());
  ASSERT_TRUE(files_->Write(Plain(), "b/sub", {{"node-1", "gpu-1", {}}}).ok());
  // A temp file a crashed rewrite left next to the file goes with it.
  ASSERT_TRUE(WriteFileAtomically(files_->ClaimDir("team-a", "shared-gpu") + "/a/.metadata.json.tmp-7", "x").ok());
  ASSERT_TRUE(files_->Remove(kUid, "team-a", "shared-gpu", {"a"}).ok());
  EXPECT_FALSE(PathExists(files_->SpecPath(kUid, "a")));
  EXPECT_FALSE(PathExists(files_->ClaimDir("team-a", "shared-gpu") + "/a"));
  EXPECT_TRUE(PathExists(files_->FilePath("team-a", "shared-gpu", "b")));
  ASSERT_TRUE(files_->Remove(kUid, "team-a", "shared-gpu", {"b", "never-written"}).ok());
  EXPECT_FALSE(PathExists(files_->SpecPath(kUid, "b")));
  EXPECT_FALSE(PathExists(files_->ClaimDir("team-a", "shared-gpu")));
  EXPECT_TRUE(PathExists(files_->Root()));
  // Again: nothing left is success.
  EXPECT_TRUE(files_->Remove(kUid, "team-a", "shared-gpu", {"a", "b"}).ok());
}

// A claim deleted and made again under its name writes the same directory:
// removing the older claim leaves the newer claim's file.
TEST_F(DeviceMetadataFilesTest, RemoveLeavesTheFileOfANewerClaimOfTheSameName) {
  MetadataClaim newer = Plain();
  newer.uid = kOtherUid;
  ASSERT_TRUE(files_->Write(Plain(), "gpu", {{"node-1", "gpu-0", {}}}).ok());
  ASSERT_TRUE(files_->Write(newer, "gpu", {{"node-1", "gpu-1", {}}}).ok());
  ASSERT_TRUE(files_->Remove(kUid, "team-a", "shared-gpu", {"gpu"}).ok());
  EXPECT_FALSE(PathExists(files_->SpecPath(kUid, "gpu")));
  EXPECT_TRUE(PathExists(files_->SpecPath(kOtherUid, "gpu")));
  EXPECT_TRUE(PathExists(files_->FilePath("team-a", "shared-gpu", "gpu")));
}

TEST_F(DeviceMetadataFilesTest, RemoveAllOfFindsTheClaimByUid) {
  MetadataClaim other{kOtherUid, "team-b", "other", std::nullopt};
  ASSERT_TRUE(files_->Write(Plain(), "gpu", {{"node-1", "gpu-0", {}}}).ok());
  ASSERT_TRUE(files_->Write(other, "gpu", {{"node-1", "gpu-1", {}}}).ok());
  ASSERT_TRUE(
      WriteFileAtomically(dir_ + "/cdi/.gpu.nvidia.com_metadata_" + std::string(kUid) + "_gpu.json.tmp-3", "{").ok());
  auto uids = files_->ListUids();
  ASSERT_TRUE(uids.ok());
  EXPECT_EQ(*uids, (std::set<std::string>{kUid, kOtherUid}));
  ASSERT_TRUE(files_->RemoveAllOf(kUid).ok());
  EXPECT_FALSE(PathExists(files_->ClaimDir("team-a", "shared-gpu")));
  EXPECT_FALSE(PathExists(files_->SpecPath(kUid, "gpu")));
  EXPECT_FALSE(PathExists(dir_ + "/cdi/.gpu.nvidia.com_metadata_" + std::string(kUid) + "_gpu.json.tmp-3"));
  EXPECT_TRUE(PathExists(files_->FilePath("team-b", "other", "gpu")));
  uids = files_->ListUids();
  ASSERT_TRUE(uids.ok());
  EXPECT_EQ(*uids, (std::set<std::string>{kOtherUid}));
}

TEST_F(DeviceMetadataFilesTest, RewriteOfTheSameBytesLeavesTheFile) {
  ASSERT_TRUE(files_->Write(Plain(), "gpu", {{"node-1", "gpu-0", {}}}).ok());
  const std::string file = files_->FilePath("team-a", "shared-gpu", "gpu");
  struct stat before, after;
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  ASSERT_TRUE(files_->Write(Plain(), "gpu", {{"node-1", "gpu-0", {}}}).ok());
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);  // a rewrite would rename a new inode in
}

}  // namespace
}  // namespace nvdra::driver
