// Runs the built nvdractl binary for the CLI tests: its exit code and its
// output (stdout and stderr together).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "util/test_paths.h"

namespace nvdra::ctl::testing {

struct CtlRun {
  int exit_code = -1;
  std::string out;
};

inline CtlRun Nvdractl(const std::string& args) {
  std::string cmd = std::string(NVDRA_BIN_DIR) + "/nvdractl " + args + " 2>&1";
  CtlRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace nvdra::ctl::testing
