// Tests only: a claim spec written through the CDI spec writer, compared
// with its golden file and parsed back as JSON and as YAML.
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cdi/cdi_spec_writer.h"
#include "cdi/testdata/golden.h"
#include "util/file_util.h"

namespace nvdra::testing {

inline void ExpectClaimSpecMatchesGolden(const cdi::CdiSpecWriter& writer, const std::string& uid,
                                         const std::vector<cdi::SpecDevice>& devs,
                                         const cdi::ContainerEdits& common, const std::string& golden_path) {
  cdi::Spec spec = writer.BuildClaimSpec(uid, devs, common);
  Status s = writer.WriteClaimSpec(uid, spec);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto content = ReadFileToString(*writer.ClaimSpecPath(uid));
  ASSERT_TRUE(content.ok());
  ExpectMatchesGolden(golden_path, *content);
  auto j = nlohmann::json::parse(*content);
  EXPECT_EQ(j["cdiVersion"], "0.5.0");
  YAML::Node y = YAML::Load(*content);
  EXPECT_EQ(y["devices"].size(), devs.size());
}

}  // namespace nvdra::testing
