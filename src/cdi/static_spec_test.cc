// Plugin-level spec files: written once per content, replacing an upstream
// .yaml of the same name, refusing names that are not file names.
#include "cdi/static_spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::cdi {
namespace {

Spec BaseSpec() {
  Spec s;
  s.kind = "k8s.compute-domain.nvidia.com/device";
  s.devices.push_back({"all", {.device_nodes = {{.path = "/dev/nvidiactl"}}}});
  s.edits.env = {"NVIDIA_VISIBLE_DEVICES=void"};
  return s;
}

TEST(StaticSpecTest, WritesOnceAndReplacesTheUpstreamYaml) {
  nvdra::testing::TempDir tmp;
  const std::string name = "k8s.compute-domain.nvidia.com-device_base";
  ASSERT_TRUE(WriteFileAtomically(tmp.path() + "/" + name + ".yaml", "---\nold: spec\n").ok());
  ASSERT_TRUE(WriteStaticSpec(tmp.path(), name, BaseSpec()).ok());
  const std::string path = tmp.path() + "/" + name + ".json";
  auto j = nlohmann::json::parse(*ReadFileToString(path));
  EXPECT_EQ(j["devices"][0]["name"], "all");
  EXPECT_EQ(j["cdiVersion"], "0.3.0");
  EXPECT_FALSE(PathExists(tmp.path() + "/" + name + ".yaml"));
  struct stat before, after;
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  EXPECT_EQ(before.st_mode & 0777, 0644u);
  ASSERT_TRUE(WriteStaticSpec(tmp.path(), name, BaseSpec()).ok());
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "same bytes: the file is not replaced";
}

TEST(StaticSpecTest, RefusesBadNamesAndInvalidSpecs) {
  nvdra::testing::TempDir tmp;
  EXPECT_FALSE(WriteStaticSpec(tmp.path(), "../escape", BaseSpec()).ok());
  EXPECT_FALSE(WriteStaticSpec(tmp.path(), "", BaseSpec()).ok());
  Spec bad = BaseSpec();
  bad.devices.clear();
  EXPECT_FALSE(WriteStaticSpec(tmp.path(), "x-base", bad).ok());
  EXPECT_FALSE(PathExists(tmp.path() + "/x-base.json"));
}

}  // namespace
}  // namespace nvdra::cdi
