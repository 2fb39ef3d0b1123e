// Helpers shared by this layer's tests: a scratch directory short enough
// for Unix socket paths, and claim builders.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <string>

#include "kubelet/claim_engine.h"

namespace nvdra::kubelet::testing {

class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/nvk-XXXXXX";
    char* d = mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    path_ = d ? d : "/tmp";
  }
  ~ScratchDir() { (void)std::system(("rm -rf " + path_).c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A well-formed UID whose last characters are `tag`.
inline std::string Uid(const std::string& tag) {
  std::string base = "0b6e4a5c-1f2d-4c3b-9a8e-000000000000";
  return base.substr(0, base.size() - tag.size()) + tag;
}

inline ClaimRef Claim(const std::string& tag) { return {"default", Uid(tag), "claim-" + tag}; }

}  // namespace nvdra::kubelet::testing
