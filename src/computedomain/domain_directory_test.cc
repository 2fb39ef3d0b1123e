// DomainDirectories on real files: the daemon's directory with the config
// template, and removal of directories whose domain is gone.
#include "computedomain/domain_directory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <sstream>

#include "util/file_util.h"
#include "util/go_template.h"
#include "util/test_paths.h"
#include "util/test_temp_dir.h"

namespace nvdra::computedomain {
namespace {

TEST(DomainDirectoriesTest, PrepareCreatesTheDirectoryWithTheTemplate) {
  nvdra::testing::TempDir tmp;
  std::string tmpl = JoinPath(tmp.path(), "daemon.tmpl.cfg");
  ASSERT_TRUE(WriteFileAtomically(tmpl, "IMEX_CMD_PORT=50005\n").ok());
  DomainDirectories dirs(JoinPath(tmp.path(), "plugin"), tmpl);
  ASSERT_TRUE(dirs.Prepare("d1").ok());
  ASSERT_TRUE(dirs.Prepare("d1").ok());  // idempotent
  auto copied = ReadFileToString(JoinPath(dirs.Dir("d1"), kDaemonConfigTemplateName));
  ASSERT_TRUE(copied.ok());
  EXPECT_EQ(*copied, "IMEX_CMD_PORT=50005\n");
  struct stat st {};
  ASSERT_EQ(::stat(dirs.Dir("d1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat(JoinPath(dirs.Dir("d1"), kDaemonConfigTemplateName).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_FALSE(dirs.Prepare("../x").ok());
}

TEST(DomainDirectoriesTest, AMissingTemplateSaysWhichFlagToSet) {
  nvdra::testing::TempDir tmp;
  DomainDirectories dirs(JoinPath(tmp.path(), "plugin"), JoinPath(tmp.path(), "absent.cfg"));
  Status s = dirs.Prepare("d1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--compute-domain-daemon-config-template"), std::string::npos) << s.message();
}

TEST(DomainDirectoriesTest, RemovesOnlyDirectoriesOfDomainsKnownToBeGone) {
  nvdra::testing::TempDir tmp;
  std::string tmpl = JoinPath(tmp.path(), "t.cfg");
  ASSERT_TRUE(WriteFileAtomically(tmpl, "x").ok());
  DomainDirectories dirs(JoinPath(tmp.path(), "plugin"), tmpl);
  for (const char* d : {"live", "gone", "unknown"}) ASSERT_TRUE(dirs.Prepare(d).ok());
  auto removed = dirs.RemoveGone([](const std::string& uid) -> std::optional<bool> {
    if (uid == "live") return true;
    if (uid == "gone") return false;
    return std::nullopt;  // cannot tell: keep
  });
  EXPECT_EQ(removed, std::vector<std::string>{"gone"});
  EXPECT_TRUE(PathExists(dirs.Dir("live")));
  EXPECT_FALSE(PathExists(dirs.Dir("gone")));
  EXPECT_TRUE(PathExists(dirs.Dir("unknown")));
}

// The IMEX daemon config template the image ships, rendered as the
// compute-domain daemon renders it (a Go template with its two fields), sets
// every key of upstream's template to the same value: a daemon started from
// it behaves as it does with upstream's.
TEST(DomainDirectoriesTest, TheShippedDaemonTemplateSetsEveryKeyOfUpstreamsWithItsValue) {
  auto text = ReadFileToString(std::string(NVDRA_SOURCE_DIR) + "/templates/compute-domain-daemon-config.tmpl.cfg");
  ASSERT_TRUE(text.ok());
  nlohmann::json data = {{"IMEXDaemonNodesConfigPath", "/imexd/nodes_config.cfg"},
                         {"IMEXCmdBindInterfaceIP", "10.244.1.7"}};
  auto rendered = RenderGoTemplate("compute-domain-daemon-config.tmpl.cfg", *text, data);
  ASSERT_TRUE(rendered.ok()) << rendered.status().message();
  std::map<std::string, std::string> got;
  std::istringstream lines(*rendered);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << "not KEY=VALUE: " << line;
    EXPECT_TRUE(got.emplace(line.substr(0, eq), line.substr(eq + 1)).second) << "set twice: " << line;
  }
  // Upstream's templates/compute-domain-daemon-config.tmpl.cfg (the same in
  // v25.12.0, v0.4.1 and main), with the daemon's fields filled in.
  const std::map<std::string, std::string> upstream = {
      {"LOG_LEVEL", "4"},
      {"LOG_FILE_NAME", ""},
      {"STATS_FILE_NAME", "/var/log/nvidia-imex-stats.log"},
      {"LOG_APPEND_TO_LOG", "0"},
      {"LOG_FILE_MAX_SIZE", "1024"},
      {"LOG_MAX_ROTATE_COUNT", "10"},
      {"LOG_USE_SYSLOG", "0"},
      {"DAEMONIZE", "0"},
      {"BIND_INTERFACE_IP", ""},
      {"SERVER_PORT", "50000"},
      {"IMEX_NODE_CONFIG_FILE", "/imexd/nodes_config.cfg"},
      {"NETWORK_INTERFACE", ""},
      {"IMEX_WAIT_FOR_QUORUM", "RECOVERY"},
      {"IMEX_ENABLE_AUTH_ENCRYPTION", "0"},
      {"IMEX_AUTH_ENCRYPTION_MODE", "SSL_TLS"},
      {"IMEX_AUTH_SOURCE", ""},
      {"IMEX_SERVER_KEY", ""},
      {"IMEX_SERVER_CERT", ""},
      {"IMEX_SERVER_CERT_AUTH", ""},
      {"IMEX_CLIENT_KEY", ""},
      {"IMEX_CLIENT_CERT", ""},
      {"IMEX_CLIENT_CERT_AUTH", ""},
      {"IMEX_SECURITY_TARGET_OVERRIDE", ""},
      {"IMEX_GSS_SERVICE_NAME", "host"},
      {"IMEX_GSS_TIMEOUT_SEC", "30"},
      {"IMEX_GSS_RETRY_INTERVAL_SEC", "5"},
      {"IMEX_GSS_SEC_CONTEXT_LIFETIME_SEC", "-1"},
      {"IMEX_GSS_SHUTDOWN_ON_FAILURE", "0"},
      {"IMEX_CMD_ENABLED", "1"},
      {"IMEX_CMD_BIND_INTERFACE_IP", "10.244.1.7"},
      {"IMEX_CMD_PORT", "50005"},
      {"IMEX_CMD_UNIX_DOMAIN_PATH", ""},
      {"IMEX_NODE_DISCONNECTED_GRACE_TIME", "-1"},
  };
  ASSERT_EQ(upstream.size(), 33u);
  EXPECT_EQ(got, upstream);
}

}  // namespace
}  // namespace nvdra::computedomain
