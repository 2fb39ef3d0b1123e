// Helpers shared by this layer's tests: claim builders, and the prefix for
// temporary directories that hold Unix sockets.
#pragma once

#include <string>

#include "kubelet/claim_engine.h"
#include "util/test_temp_dir.h"

namespace nvdra::kubelet::testing {

// Socket paths must fit in 108 bytes, so socket tests use a short prefix
// with ::nvdra::testing::TempDir.
inline constexpr const char* kShortTempPrefix = "nvk";

// A well-formed UID whose last characters are `tag`.
inline std::string Uid(const std::string& tag) {
  std::string base = "0b6e4a5c-1f2d-4c3b-9a8e-000000000000";
  return base.substr(0, base.size() - tag.size()) + tag;
}

inline ClaimRef Claim(const std::string& tag) { return {"default", Uid(tag), "claim-" + tag}; }

}  // namespace nvdra::kubelet::testing
