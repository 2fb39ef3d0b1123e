#include "kubelet/kubelet_flags.h"

namespace nvdra::kubelet {

void AddKubeletFlags(CLI::App& app, KubeletFlags& f) {
  app.add_option("--kubelet-plugins-directory-path", f.plugin.plugins_dir,
                 "the kubelet's plugin data directory; the DRA socket is <this>/<driver>/dra.sock")
      ->envname("KUBELET_PLUGINS_DIRECTORY_PATH")
      ->capture_default_str();
  app.add_option("--kubelet-registrar-directory-path", f.plugin.registrar_dir,
                 "the kubelet's plugin registry; the registration socket is <this>/<driver>-reg.sock")
      ->envname("KUBELET_REGISTRAR_DIRECTORY_PATH")
      ->capture_default_str();
  app.add_option("--healthcheck-port", f.healthcheck_port,
                 "TCP port of the grpc.health.v1 liveness endpoint; 0 any free port, -1 off")
      ->envname("HEALTHCHECK_PORT")
      ->capture_default_str();
  app.add_option("--rolling-update-id", f.plugin.rolling_update_id,
                 "serve dra-<id>.sock and <driver>-<id>-reg.sock so an old and a new plugin pod can "
                 "run side by side (use the pod UID)")
      ->envname("ROLLING_UPDATE_ID");
  app.add_option("--claim-timeout", f.claim_timeout_seconds,
                 "seconds a claim may take before the kubelet gets a retryable error (keep below 45)")
      ->envname("CLAIM_TIMEOUT")
      ->check(CLI::Range(1, 44))
      ->capture_default_str();
  app.add_option("--max-claims-per-request", f.plugin.dispatcher.max_claims_per_request,
                 "claims accepted in one kubelet call")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--claim-workers", f.plugin.dispatcher.workers, "claims prepared at once")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
}

void FinishKubeletFlags(KubeletFlags& f) {
  f.plugin.dispatcher.claim_timeout = std::chrono::seconds(f.claim_timeout_seconds);
}

}  // namespace nvdra::kubelet
