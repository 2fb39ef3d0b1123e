#include "util/go_flag_args.h"

#include <gtest/gtest.h>

namespace nvdra {
namespace {

FlagArity Known(std::string_view name) {
  if (name == "v" || name == "node-name" || name == "feature-gates") return FlagArity::kValue;
  if (name == "log-text-split-stream" || name == "help") return FlagArity::kSwitch;
  return FlagArity::kUnknown;
}

using Args = std::vector<std::string>;

TEST(GoFlagArgsTest, OneDashLongFlagsBecomeTwoDashFlags) {
  EXPECT_EQ(GoFlagArgs({"-v=3", "-node-name", "n1", "-feature-gates=A=true,B=false", "-log-text-split-stream"}, Known),
            (Args{"--v=3", "--node-name", "n1", "--feature-gates=A=true,B=false", "--log-text-split-stream"}));
  EXPECT_EQ(GoFlagArgs({"-v", "3"}, Known), (Args{"--v", "3"}));
  EXPECT_EQ(GoFlagArgs({"--v=3", "--node-name=n1"}, Known), (Args{"--v=3", "--node-name=n1"}));
}

TEST(GoFlagArgsTest, ValuesPositionalsAndUnknownNamesStayAsWritten) {
  // The value of a flag is never a flag, even when it starts with a dash.
  EXPECT_EQ(GoFlagArgs({"-node-name", "-feature-gates", "-v", "2"}, Known),
            (Args{"--node-name", "-feature-gates", "--v", "2"}));
  EXPECT_EQ(GoFlagArgs({"-v3", "-bogus", "x", "-", "--", "-v=1"}, Known),
            (Args{"-v3", "-bogus", "x", "-", "--", "-v=1"}));
  // A switch takes no separate value.
  EXPECT_EQ(GoFlagArgs({"-log-text-split-stream", "-v=1"}, Known), (Args{"--log-text-split-stream", "--v=1"}));
}

}  // namespace
}  // namespace nvdra
