#include "kube/kube_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::kube {
namespace {

class KubeConfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    auto p = (dir_ / name).string();
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    EXPECT_TRUE(WriteFileAtomically(p, text).ok());
    return p;
  }
  ::nvdra::testing::TempDir tmp_{"nvdra-kubeconfig"};
  std::filesystem::path dir_{tmp_.path()};
};

constexpr const char* kMulti = R"(
apiVersion: v1
kind: Config
current-context: b
clusters:
- name: ca
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: aGVsbG8gQ0E=
- name: cb
  cluster:
    server: https://10.0.0.2:6443
    certificate-authority: certs/ca.pem
    insecure-skip-tls-verify: true
users:
- name: ua
  user:
    token: abc
- name: ub
  user:
    client-certificate: certs/c.pem
    client-key-data: a2V5
    tokenFile: /abs/token
contexts:
- name: a
  context: {cluster: ca, user: ua}
- name: b
  context: {cluster: cb, user: ub}
)";

TEST_F(KubeConfigTest, CurrentContextFilesRelativeToKubeconfig) {
  auto path = Write("config", kMulti);
  auto c = LoadKubeconfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.2:6443");
  EXPECT_EQ(c->ca_file, (dir_ / "certs/ca.pem").string());
  EXPECT_TRUE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->client_cert_file, (dir_ / "certs/c.pem").string());
  EXPECT_EQ(c->client_key_pem, "key");
  EXPECT_EQ(c->token_file, "/abs/token");
}

TEST_F(KubeConfigTest, NamedContextTokenAndCaData) {
  auto c = LoadKubeconfig(Write("config", kMulti), "a");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(c->ca_pem, "hello CA");
  EXPECT_EQ(c->token, "abc");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
}

TEST_F(KubeConfigTest, ClearErrors) {
  auto missing_ctx = LoadKubeconfig(Write("config", kMulti), "zzz");
  EXPECT_EQ(missing_ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing_ctx.status().message().find("context \"zzz\" not found"), std::string::npos);
  EXPECT_FALSE(LoadKubeconfig((dir_ / "nope").string()).ok());
  EXPECT_FALSE(LoadKubeconfig(Write("bad", "clusters: [")).ok());
  auto exec = LoadKubeconfig(Write("exec", R"(
current-context: x
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {exec: {command: aws}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)"));
  EXPECT_NE(exec.status().message().find("exec"), std::string::npos);
  auto half = LoadKubeconfig(Write("half", R"(
current-context: x
clusters: [{name: c, cluster: {server: "https://h"}}]
users: [{name: u, user: {client-certificate: /c}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)"));
  EXPECT_NE(half.status().message().find("client key"), std::string::npos);
}

TEST_F(KubeConfigTest, InClusterFromFakeEnvironment) {
  Write("sa/token", "tok\n");
  Write("sa/ca.crt", "pem");
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                            {"KUBERNETES_SERVICE_PORT", "443"}};
  auto getenv = [&](const std::string& k) { return env.count(k) ? env[k] : std::string(); };
  auto c = ResolveKubeConfig("", getenv, (dir_ / "sa").string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->ca_file, (dir_ / "sa/ca.crt").string());
  BearerToken tok(*c);
  EXPECT_EQ(*tok.Get(), "tok");

  env["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  EXPECT_EQ(LoadInClusterConfig(getenv, (dir_ / "sa").string())->server, "https://[fd00::1]:443");
  env.clear();
  auto none = ResolveKubeConfig("", getenv, (dir_ / "sa").string());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  // KUBECONFIG wins over in-cluster.
  env["KUBECONFIG"] = (dir_ / "missing").string() + ":" + Write("config", kMulti);
  EXPECT_EQ(ResolveKubeConfig("", getenv, (dir_ / "sa").string())->server, "https://10.0.0.2:6443");
}

TEST_F(KubeConfigTest, TokenFileRotationIsPickedUp) {
  KubeConfig c;
  c.token_file = Write("token", "first");
  BearerToken tok(c);
  EXPECT_EQ(*tok.Get(), "first");
  // Rotation replaces the file (kubelet writes a new file and renames it).
  Write("token", "second-longer");
  EXPECT_EQ(*tok.Get(), "second-longer");
  // A briefly missing file keeps the last good token.
  std::filesystem::remove(c.token_file);
  EXPECT_EQ(*tok.Get(), "second-longer");
  KubeConfig none;
  none.token_file = (dir_ / "absent").string();
  BearerToken missing(none);
  EXPECT_EQ(missing.Get().status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace nvdra::kube
