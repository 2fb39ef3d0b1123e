// Tests only: a mock node (a built-in profile's driver root in a temporary
// directory, discovered) with its device nodes and driver files as the
// runtime sees them: the mock root stands for a containerised driver at
// /run/nvidia/driver on the host, and hooks are on.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "devices/device_nodes.h"
#include "devices/mock/mock_device_lib.h"
#include "devices/toolkit/driver_files.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices::testing {

struct MockNode {
  ::nvdra::testing::TempDir dir;
  std::unique_ptr<MockDeviceLib> lib;
  NodeInventory inv;
  DriverRoot root{"/", "/"};

  explicit MockNode(const std::string& profile) {
    auto p = LoadMockProfile(profile);
    EXPECT_TRUE(p.ok());
    auto l = MockDeviceLib::Create(*p, dir.path() + "/root");
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    lib = std::move(*l);
    inv = *lib->Discover();
    root = DriverRoot(lib->driver_root().container_root(), "/run/nvidia/driver");
  }
  // `allow_regular_files`: the mock root holds regular files for nodes.
  DeviceNodes Nodes(bool allow_regular_files = true) const {
    return DeviceNodes(root, lib->proc_devices_path(), lib->capabilities_dir(), allow_regular_files);
  }
  // Driver files and hooks as the plugins attach them.
  std::shared_ptr<DriverFilesCache> DriverFiles() const {
    std::string version = inv.driver_version;
    return std::make_shared<DriverFilesCache>(
        root, [version]() -> Result<std::string> { return version; },
        "/var/lib/kubelet/plugins/gpu.nvidia.com/nvidia-cdi-hook");
  }
};

}  // namespace nvdra::devices::testing
