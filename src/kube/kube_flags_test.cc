#include "kube/kube_flags.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

namespace nvdra::kube {
namespace {

TEST(KubeFlagsTest, DefaultsMatchUpstream) {
  CLI::App app;
  KubeFlags f;
  AddKubeFlags(app, f);
  const char* argv[] = {"x"};
  app.parse(1, argv);
  EXPECT_EQ(f.qps, 5);
  EXPECT_EQ(f.burst, 10);
  EXPECT_EQ(f.kubeconfig, "");
}

TEST(KubeFlagsTest, ParsesFlags) {
  CLI::App app;
  KubeFlags f;
  AddKubeFlags(app, f);
  const char* argv[] = {"x", "--kube-api-qps", "20", "--kube-api-burst", "40", "--kubeconfig", "/k"};
  app.parse(7, argv);
  EXPECT_EQ(f.qps, 20);
  EXPECT_EQ(f.burst, 40);
  EXPECT_EQ(f.kubeconfig, "/k");
  auto c = NewKubeClient(
      KubeFlags{}, [](const std::string&) { return std::string(); }, "/nonexistent");
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace nvdra::kube
