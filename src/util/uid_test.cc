#include "util/uid.h"

#include <gtest/gtest.h>

namespace nvdra {
namespace {

TEST(UidTest, AcceptsKubernetesUids) {
  EXPECT_TRUE(IsValidClaimUid("0f1e2d3c-aaaa-bbbb-cccc-111122223333"));
  EXPECT_TRUE(IsValidClaimUid("abc"));
}

TEST(UidTest, RejectsAnythingThatCouldEscapeADirectory) {
  for (const char* bad : {"", "../etc", "a/b", "..", ".", "a.b", "-a", "a-", "a b", "a\nb", "a\\b"}) {
    EXPECT_FALSE(IsValidClaimUid(bad)) << bad;
    EXPECT_EQ(ValidateClaimUid(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(IsValidClaimUid(std::string(129, 'a')));
}

TEST(UidTest, ObjectNames) {
  EXPECT_TRUE(IsValidObjectName("default"));
  EXPECT_TRUE(IsValidObjectName("my-claim.x"));
  EXPECT_FALSE(IsValidObjectName("My"));
  EXPECT_FALSE(IsValidObjectName(""));
  EXPECT_FALSE(IsValidObjectName("a/b"));
}

}  // namespace
}  // namespace nvdra
