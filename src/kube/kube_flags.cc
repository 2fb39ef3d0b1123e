#include "kube/kube_flags.h"

#include <CLI/CLI.hpp>

namespace nvdra::kube {

void AddKubeFlags(CLI::App& app, KubeFlags& flags) {
  // KUBECONFIG is read by ResolveKubeConfig, which also understands a
  // colon-separated list; CLI11's envname would take it as one path.
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "Absolute path to a kubeconfig file; empty means KUBECONFIG, then in-cluster configuration");
  app.add_option("--kube-api-qps", flags.qps, "QPS to use while communicating with the Kubernetes API server")
      ->envname("KUBE_API_QPS")
      ->capture_default_str();
  app.add_option("--kube-api-burst", flags.burst, "Burst to use while communicating with the Kubernetes API server")
      ->envname("KUBE_API_BURST")
      ->capture_default_str();
}

Result<std::unique_ptr<KubeClient>> NewKubeClient(const KubeFlags& flags, const GetEnvFn& getenv,
                                                  const std::string& sa_dir) {
  NVDRA_ASSIGN_OR_RETURN(KubeConfig config, ResolveKubeConfig(flags.kubeconfig, getenv, sa_dir));
  KubeClientOptions o;
  o.qps = flags.qps;
  o.burst = flags.burst;
  return KubeClient::FromConfig(config, o);
}

}  // namespace nvdra::kube
