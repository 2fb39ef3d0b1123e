#include "config/quantity.h"

#include <gtest/gtest.h>

namespace nvdra::config {
namespace {

int64_t ValueOf(std::string_view s) {
  auto q = Quantity::Parse(s);
  EXPECT_TRUE(q.ok()) << s << ": " << q.status().ToString();
  return q.ok() ? q->value() : -999;
}

TEST(QuantityTest, BinaryAndDecimalSuffixes) {
  EXPECT_EQ(ValueOf("10Gi"), 10LL << 30);
  EXPECT_EQ(ValueOf("512Mi"), 512LL << 20);
  EXPECT_EQ(ValueOf("1Ki"), 1024);
  EXPECT_EQ(ValueOf("2Ti"), 2LL << 40);
  EXPECT_EQ(ValueOf("1G"), 1000000000);
  EXPECT_EQ(ValueOf("3k"), 3000);
  EXPECT_EQ(ValueOf("7"), 7);
  EXPECT_EQ(ValueOf("0"), 0);
}

TEST(QuantityTest, FractionsExponentsAndRoundingUp) {
  EXPECT_EQ(ValueOf("1.5Gi"), 1610612736);
  EXPECT_EQ(ValueOf("0.5Ki"), 512);
  EXPECT_EQ(ValueOf("2e3"), 2000);
  EXPECT_EQ(ValueOf("1E6"), 1000000);
  EXPECT_EQ(ValueOf("100m"), 1);  // Value() rounds up
  EXPECT_EQ(ValueOf("1500m"), 2);
  EXPECT_EQ(ValueOf("+4"), 4);
  EXPECT_EQ(ValueOf(" 8Mi "), 8LL << 20);
}

TEST(QuantityTest, HugeValuesSaturate) {
  EXPECT_EQ(ValueOf("9999999999999999999999999Ei"), INT64_MAX);
  EXPECT_EQ(ValueOf("1e100"), INT64_MAX);
}

TEST(QuantityTest, RejectsMalformedWithUpstreamWording) {
  for (const char* bad : {"", "abc", "10GiB", "10 Gi", "1..2", "1.5.5"}) {
    auto q = Quantity::Parse(bad);
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_NE(q.status().message().find("quantities must match the regular expression"), std::string::npos)
        << bad << ": " << q.status().message();
  }
  auto suffix = Quantity::Parse("10ki");
  ASSERT_FALSE(suffix.ok());
  EXPECT_EQ(suffix.status().message(), "unable to parse quantity's suffix");
}

TEST(QuantityTest, CanonicalFormsLikeKubernetes) {
  EXPECT_EQ(FormatBinarySI(0), "0");
  EXPECT_EQ(FormatBinarySI(512), "512");
  EXPECT_EQ(FormatBinarySI(1000), "1k");  // below 1024: DecimalSI, as upstream
  EXPECT_EQ(FormatBinarySI(1024 * 1024), "1Mi");
  EXPECT_EQ(FormatBinarySI(1536LL * 1024 * 1024), "1536Mi");
  EXPECT_EQ(FormatBinarySI(80LL << 30), "80Gi");
  EXPECT_EQ(FormatBinarySI(1025), "1025");
  EXPECT_EQ(FormatBinarySI(-2048), "-2Ki");
  EXPECT_EQ(FormatDecimalSI(4), "4");
  EXPECT_EQ(FormatDecimalSI(1000), "1k");
  EXPECT_EQ(FormatDecimalSI(1500), "1500");
  EXPECT_EQ(FormatDecimalSI(16000000000), "16G");
  // Each form reads back as the same value.
  for (int64_t v : {int64_t{0}, int64_t{1} << 20, int64_t{81559} << 20, int64_t{1000}, int64_t{4}}) {
    EXPECT_EQ(Quantity::Parse(FormatBinarySI(v))->value(), v);
    EXPECT_EQ(Quantity::Parse(FormatDecimalSI(v))->value(), v);
  }
}

TEST(QuantityTest, MegabytesLikeUpstreamMpsLimits) {
  auto q = Quantity::Parse("10Gi");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->Megabytes(), "10240M");
  EXPECT_TRUE(q->HasPositiveMegabytes());
  auto small = Quantity::Parse("1023Ki");
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(small->HasPositiveMegabytes());
  auto neg = Quantity::Parse("-1Gi");
  ASSERT_TRUE(neg.ok());
  EXPECT_LT(neg->value(), 0);
  EXPECT_FALSE(neg->HasPositiveMegabytes());
  EXPECT_EQ(q->text(), "10Gi");
}

}  // namespace
}  // namespace nvdra::config
