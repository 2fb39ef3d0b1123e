#include "kubelet/kubelet_flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace nvdra::kubelet {
namespace {

TEST(KubeletFlagsTest, DefaultsMatchUpstream) {
  CLI::App app;
  KubeletFlags f;
  AddKubeletFlags(app, f);
  const char* argv[] = {"plugin"};
  app.parse(1, const_cast<char**>(argv));
  FinishKubeletFlags(f);
  EXPECT_EQ(f.plugin.plugins_dir, "/var/lib/kubelet/plugins");
  EXPECT_EQ(f.plugin.registrar_dir, "/var/lib/kubelet/plugins_registry");
  EXPECT_EQ(f.healthcheck_port, -1);
  EXPECT_EQ(f.plugin.rolling_update_id, "");
  EXPECT_EQ(f.plugin.dispatcher.claim_timeout, std::chrono::seconds(30));
}

TEST(KubeletFlagsTest, FlagsAndEnvironment) {
  ::setenv("HEALTHCHECK_PORT", "51516", 1);
  CLI::App app;
  KubeletFlags f;
  AddKubeletFlags(app, f);
  const char* argv[] = {
      "plugin", "--kubelet-plugins-directory-path", "/x/plugins", "--rolling-update-id", "abc-1", "--claim-timeout",
      "20"};
  app.parse(7, const_cast<char**>(argv));
  ::unsetenv("HEALTHCHECK_PORT");
  FinishKubeletFlags(f);
  EXPECT_EQ(f.plugin.plugins_dir, "/x/plugins");
  EXPECT_EQ(f.plugin.rolling_update_id, "abc-1");
  EXPECT_EQ(f.healthcheck_port, 51516);
  EXPECT_EQ(f.plugin.dispatcher.claim_timeout, std::chrono::seconds(20));
  CLI::App strict;
  KubeletFlags g;
  AddKubeletFlags(strict, g);
  const char* bad[] = {"plugin", "--claim-timeout", "60"};  // past the kubelet's 45 s
  EXPECT_THROW(strict.parse(3, const_cast<char**>(bad)), CLI::ValidationError);
}

}  // namespace
}  // namespace nvdra::kubelet
