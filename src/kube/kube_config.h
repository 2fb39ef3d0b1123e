// Where the API server is and how to authenticate to it: a kubeconfig file
// (--kubeconfig / KUBECONFIG) or the in-cluster service account.
#pragma once

#include <chrono>
#include <ctime>
#include <functional>
#include <string>

#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::kube {

struct KubeConfig {
  std::string server;  // "https://host:port"
  // CA bundle: PEM text (from certificate-authority-data) or a file path.
  std::string ca_pem;
  std::string ca_file;
  std::string client_cert_pem;
  std::string client_cert_file;
  std::string client_key_pem;
  std::string client_key_file;
  std::string token;       // static bearer token
  std::string token_file;  // re-read when it changes: bound tokens rotate
  bool insecure_skip_tls_verify = false;
};

// Reads the current context (or `context` when not empty) of a kubeconfig.
// Relative file paths in it are resolved against the kubeconfig's directory,
// as kubectl does.
Result<KubeConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

using GetEnvFn = std::function<std::string(const std::string&)>;
std::string RealGetEnv(const std::string& name);

// In-cluster: KUBERNETES_SERVICE_HOST/PORT plus <sa_dir>/ca.crt and token.
Result<KubeConfig> LoadInClusterConfig(const GetEnvFn& getenv, const std::string& sa_dir = kServiceAccountDir);

// The flag wins, then KUBECONFIG, then in-cluster.
Result<KubeConfig> ResolveKubeConfig(const std::string& kubeconfig_flag, const GetEnvFn& getenv,
                                     const std::string& sa_dir = kServiceAccountDir);

// The bearer token to send. A token file is re-read when its mtime or size
// changes, so rotated service-account tokens are picked up without a restart.
class BearerToken {
 public:
  explicit BearerToken(const KubeConfig& config) : token_(config.token), file_(config.token_file) {}
  // Empty when the config has no token.
  Result<std::string> Get() EXCLUDES(mu_);

 private:
  Mutex mu_;
  std::string token_ GUARDED_BY(mu_);
  const std::string file_;
  std::timespec mtime_ GUARDED_BY(mu_) = {};
  long long size_ GUARDED_BY(mu_) = -1;
};

}  // namespace nvdra::kube
