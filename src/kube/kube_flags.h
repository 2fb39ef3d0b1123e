// The Kubernetes API flags both plugins share, spelled as upstream spells
// them: --kubeconfig (KUBECONFIG), --kube-api-qps (KUBE_API_QPS),
// --kube-api-burst (KUBE_API_BURST).
#pragma once

#include <memory>
#include <string>

#include "kube/kube_client.h"
#include "kube/kube_config.h"

namespace CLI {
class App;
}

namespace nvdra::kube {

struct KubeFlags {
  std::string kubeconfig;  // empty: KUBECONFIG, then in-cluster
  double qps = 5;
  int burst = 10;
};

void AddKubeFlags(CLI::App& app, KubeFlags& flags);

// Resolves the config (flag, KUBECONFIG, in-cluster) and builds a client.
Result<std::unique_ptr<KubeClient>> NewKubeClient(const KubeFlags& flags, const GetEnvFn& getenv = RealGetEnv,
                                                  const std::string& sa_dir = kServiceAccountDir);

}  // namespace nvdra::kube
