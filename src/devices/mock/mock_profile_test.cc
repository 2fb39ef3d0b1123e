#include "devices/mock/mock_profile.h"

#include <gtest/gtest.h>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

TEST(MockProfileTest, BuiltinsParseAndUnknownNameListsKnown) {
  for (const auto& name : BuiltinMockProfileNames()) {
    auto p = LoadMockProfile(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    EXPECT_FALSE(p->inventory.gpus.empty()) << name;
  }
  auto bad = LoadMockProfile("h200x9");
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("h100x8"), std::string::npos);
}

TEST(MockProfileTest, RejectsInvalidProfiles) {
  const std::string base = R"("driverVersion":"1.2","cudaDriverVersion":"12.0")";
  EXPECT_FALSE(ParseMockProfile("{", "x").ok());
  EXPECT_FALSE(ParseMockProfile("{" + base + R"(,"gpus":{}})", "x").ok());
  EXPECT_FALSE(ParseMockProfile("{" + base + R"(,"gpus":[],"bogus":1})", "x").ok()) << "unknown field";
  EXPECT_FALSE(
      ParseMockProfile("{" + base + R"(,"gpus":[{"productName":"a","brand":"b","architecture":"c"}]})", "x").ok())
      << "missing cudaComputeCapability";
  const std::string gpu = R"("productName":"a","brand":"b","architecture":"c","cudaComputeCapability":"8.0")";
  EXPECT_FALSE(
      ParseMockProfile("{" + base + R"(,"gpus":[{"count":2,"pciBusIds":["0000:01:00.0"],)" + gpu + "}]}", "x").ok())
      << "bus id list length";
  EXPECT_FALSE(ParseMockProfile("{" + base + R"(,"gpus":[{"migDevices":[],)" + gpu + "}]}", "x").ok())
      << "MIG devices without MIG mode";
  EXPECT_FALSE(ParseMockProfile("{" + base + R"(,"gpus":[{"pciBusIds":["0000:01:00.0"],)" + gpu +
                                    R"(},{"pciBusIds":["0000:01:00.0"],)" + gpu + "}]}",
                                "x")
                   .ok())
      << "duplicate bus id";
  EXPECT_FALSE(ParseMockProfile("{" + base +
                                    R"(,"gpus":[{"count":2,"pcieRoots":["pci0000:00","pci0000:00"],"numaNodes":[0],)" +
                                    gpu + "}]}",
                                "x")
                   .ok())
      << "numaNodes list length";
  EXPECT_FALSE(ParseMockProfile("{" + base + R"(,"gpus":[{"numaNodes":[0],)" + gpu + "}]}", "x").ok())
      << "numaNodes without the pcieRoots their sysfs entry needs";
  auto numa = ParseMockProfile(
      "{" + base + R"(,"gpus":[{"count":2,"pcieRoots":["pci0000:00","pci0000:80"],"numaNodes":[0,-1],)" + gpu + "}]}",
      "x");
  ASSERT_TRUE(numa.ok()) << numa.status().ToString();
  EXPECT_EQ(numa->inventory.gpus[0].numa_node, std::optional<int>(0));
  EXPECT_FALSE(numa->inventory.gpus[1].numa_node.has_value()) << "-1: no NUMA node, as sysfs says it";
  auto ok = ParseMockProfile("{" + base + R"(,"gpus":[{"count":3,)" + gpu + "}]}", "x");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->inventory.gpus.size(), 3u);
  EXPECT_EQ(ok->inventory.gpus[2].minor, 2);
  EXPECT_NE(ok->inventory.gpus[0].uuid, ok->inventory.gpus[1].uuid);
  EXPECT_EQ(ok->inventory.gpus[0].uuid.rfind("GPU-", 0), 0u);
}

TEST(MockProfileTest, FileProfileUuidsDoNotDependOnDirectory) {
  nvdra::testing::TempDir a, b;
  std::string text =
      R"({"driverVersion":"1.2","cudaDriverVersion":"12.0","gpus":[{"productName":"a","brand":"b","architecture":"c","cudaComputeCapability":"8.0"}]})";
  ASSERT_TRUE(WriteFileAtomically(a.path() + "/p.json", text).ok());
  ASSERT_TRUE(WriteFileAtomically(b.path() + "/p.json", text).ok());
  auto pa = LoadMockProfile(a.path() + "/p.json");
  auto pb = LoadMockProfile(b.path() + "/p.json");
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(pa->inventory.gpus[0].uuid, pb->inventory.gpus[0].uuid);
}

}  // namespace
}  // namespace nvdra::devices
