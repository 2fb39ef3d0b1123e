#include "kubelet/device_list.h"

#include <gtest/gtest.h>

namespace nvdra::kubelet {
namespace {

TEST(DeviceListTest, BaseRequestNameStripsSubrequest) {
  EXPECT_EQ(BaseRequestName("gpu"), "gpu");
  EXPECT_EQ(BaseRequestName("gpu/large"), "gpu");
  EXPECT_EQ(BaseRequestName(""), "");
}

TEST(DeviceListTest, SortsMergesAndStrips) {
  std::vector<PreparedDevice> in{
      {{"b/sub"}, "pool", "gpu-1", {"cdi/a", "cdi/b"}, ""},
      {{"a"}, "pool", "gpu-0", {"cdi/x"}, ""},
      {{"b"}, "pool", "gpu-1", {"cdi/b", "cdi/c"}, ""},
      {{"a"}, "pool", "gpu-0", {"cdi/x"}, ""},
      {{"c"}, "another", "gpu-9", {}, ""},
  };
  auto out = NormalizeDevices(in, true);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].pool, "another");
  EXPECT_EQ(out[1].device, "gpu-0");
  EXPECT_EQ(out[1].requests, std::vector<std::string>({"a"}));
  EXPECT_EQ(out[1].cdi_device_ids, std::vector<std::string>({"cdi/x"}));
  EXPECT_EQ(out[2].device, "gpu-1");
  EXPECT_EQ(out[2].requests, std::vector<std::string>({"b"}));
  EXPECT_EQ(out[2].cdi_device_ids, std::vector<std::string>({"cdi/a", "cdi/b", "cdi/c"}));
  // Order of the input does not matter.
  std::reverse(in.begin(), in.end());
  auto again = NormalizeDevices(in, true);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[2].requests, out[2].requests);
  EXPECT_EQ(again[1], out[1]);
}

TEST(DeviceListTest, ShareIdKeptForV1AndDroppedForV1beta1) {
  std::vector<PreparedDevice> in{
      {{"r1"}, "p", "gpu-0", {"c1"}, std::string("s1")},
      {{"r2"}, "p", "gpu-0", {"c2"}, std::string("s2")},
  };
  auto v1 = NormalizeDevices(in, true);
  ASSERT_EQ(v1.size(), 2u);
  EXPECT_EQ(v1[0].share_id, "s1");
  EXPECT_EQ(v1[1].share_id, "s2");
  auto v1beta1 = NormalizeDevices(in, false);
  ASSERT_EQ(v1beta1.size(), 1u);  // same device without share ids: one entry
  EXPECT_TRUE(v1beta1[0].share_id.empty());
  EXPECT_EQ(v1beta1[0].requests, std::vector<std::string>({"r1", "r2"}));
  EXPECT_EQ(v1beta1[0].cdi_device_ids, std::vector<std::string>({"c1", "c2"}));
}

}  // namespace
}  // namespace nvdra::kubelet
