// Mock hardware profiles: the node's GPUs, MIG devices, clique and IMEX
// channels described in JSON (schema in docs/mock-hardware.md), either one of
// the built-in named profiles or a file given with --mock-hardware=FILE.
#pragma once

#include <string>
#include <vector>

#include "devices/device_info.h"
#include "devices/fabric_manager.h"
#include "util/status.h"

namespace nvdra::devices {

struct MockProfile {
  std::string name;
  NodeInventory inventory;  // fully expanded: minors, UUIDs, bus ids filled in
  int imex_channels = 0;    // channel nodes created in the fake dev root
  // The partitions the mock Fabric Manager offers (mock_fabric_manager.h);
  // each GPU's uuid and bus id filled in from its module id. Empty: the
  // node has no NVSwitch fabric.
  std::vector<FabricPartition> fabric_partitions;
};

// Names of the built-in profiles ("a100-mig", "dynamic-mig", "gb200x4", "h100x8").
std::vector<std::string> BuiltinMockProfileNames();
// The JSON text of a built-in profile, or NotFound listing the known names.
Result<std::string> BuiltinMockProfileJson(const std::string& name);

// The MIG profiles and placements a GPU model offers (a GPU's "migProfiles"
// in a profile): "a100-40gb" (NVIDIA A100-SXM4-40GB) and "h100-80gb" (NVIDIA
// H100 80GB HBM3), 8 memory slices each.
Result<std::vector<MigProfileInfo>> BuiltinMigProfiles(const std::string& model);

// Parses profile JSON; `name` is used for deterministic UUIDs.
Result<MockProfile> ParseMockProfile(const std::string& json_text, const std::string& name);

// A built-in name, or else a path to a JSON file.
Result<MockProfile> LoadMockProfile(const std::string& name_or_path);

}  // namespace nvdra::devices
