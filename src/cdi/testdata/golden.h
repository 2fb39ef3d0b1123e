// Golden-file comparison for tests: compares output with a checked-in file,
// or rewrites the file when NVDRA_UPDATE_GOLDEN=1 is set.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "util/file_util.h"

namespace nvdra::testing {

inline void ExpectMatchesGolden(const std::string& path, const std::string& actual) {
  const char* update = std::getenv("NVDRA_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    ASSERT_TRUE(WriteFileAtomically(path, actual, 0644, false).ok()) << path;
    return;
  }
  auto expected = ReadFileToString(path);
  ASSERT_TRUE(expected.ok()) << "missing golden file " << path
                             << " (regenerate with NVDRA_UPDATE_GOLDEN=1)";
  EXPECT_EQ(*expected, actual) << "output differs from " << path
                               << " (regenerate with NVDRA_UPDATE_GOLDEN=1 if intended)";
}

}  // namespace nvdra::testing
