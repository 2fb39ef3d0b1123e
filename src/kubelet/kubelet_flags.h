// The command-line flags both plugin binaries share for the kubelet surface,
// named as upstream's (with the same environment fallbacks), so Helm charts
// and DaemonSets written for the Go driver work unchanged.
#pragma once

#include <CLI/CLI.hpp>

#include "kubelet/dra_plugin_server.h"

namespace nvdra::kubelet {

struct KubeletFlags {
  DraPluginOptions plugin;    // driver_name is set by the binary, not a flag
  int healthcheck_port = -1;  // -1 off, 0 any free port
  std::string healthcheck_host = "[::]";
  int claim_timeout_seconds = 30;
};

// Adds --kubelet-plugins-directory-path (KUBELET_PLUGINS_DIRECTORY_PATH),
// --kubelet-registrar-directory-path (KUBELET_REGISTRAR_DIRECTORY_PATH),
// --healthcheck-port (HEALTHCHECK_PORT), --rolling-update-id
// (ROLLING_UPDATE_ID), --claim-timeout (CLAIM_TIMEOUT, seconds),
// --max-claims-per-request and --claim-workers.
void AddKubeletFlags(CLI::App& app, KubeletFlags& flags);

// Copies the parsed values that need conversion into flags.plugin.
void FinishKubeletFlags(KubeletFlags& flags);

}  // namespace nvdra::kubelet
