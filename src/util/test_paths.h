// Where a test finds the source tree, the build's binaries and the shared
// fixtures. The paths are compiled into one small generated file per build
// tree (test_paths.cc), so test objects themselves carry no absolute paths
// and are identical across checkouts.
#pragma once

namespace nvdra::test_paths {
const char* SourceDir();
const char* BinaryDir();
const char* BinDir();
const char* SharedDir();
}  // namespace nvdra::test_paths

#define NVDRA_SOURCE_DIR ::nvdra::test_paths::SourceDir()
#define NVDRA_BINARY_DIR ::nvdra::test_paths::BinaryDir()
#define NVDRA_BIN_DIR ::nvdra::test_paths::BinDir()
#define NVDRA_SHARED_DIR ::nvdra::test_paths::SharedDir()
