// The ComputeDomain plugin's published devices: daemon-0 and the channels.
#include "computedomain/compute_domain_published_devices.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "devices/device_names.h"
#include "devices/inventory_json.h"

namespace nvdra::computedomain {
namespace {

TEST(ComputeDomainPublishedDevicesTest, ComputeDomainDevices) {
  auto devs = ComputeDomainPublishedDevices();
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].name, "channel-0");
  EXPECT_EQ(devs[1].name, "daemon-0");
  EXPECT_EQ(std::get<std::string>(devs[0].attributes.at("type")), "channel");
  EXPECT_EQ(std::get<int64_t>(devs[0].attributes.at("id")), 0);
  EXPECT_EQ(std::get<std::string>(devs[1].attributes.at("type")), "daemon");
  EXPECT_TRUE(devs[0].capacity.empty());
  EXPECT_EQ(ComputeDomainPublishedDevices(4).size(), 5u);
  EXPECT_EQ(ComputeDomainPublishedDevices(100000).size(), static_cast<size_t>(devices::kMaxImexChannels + 1));
}

TEST(ComputeDomainPublishedDevicesTest, RenderedDevicesParse) {
  auto j = nlohmann::json::parse(devices::RenderPublishedDevicesJson(ComputeDomainPublishedDevices()));
  EXPECT_EQ(j[1]["attributes"]["type"]["string"], "daemon");
  EXPECT_EQ(j[0]["attributes"]["id"]["int"], 0);
}

}  // namespace
}  // namespace nvdra::computedomain
