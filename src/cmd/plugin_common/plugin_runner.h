// The one main() both kubelet plugins share: flags, logging, hardware, the
// ledger, the Kubernetes client, the engine, the reconciler, the slice
// publisher, the kubelet-facing servers, metrics and a clean shutdown. A
// plugin binary only says which device kind it serves.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cdi/cdi_spec_writer.h"
#include "devices/device_lib.h"
#include "driver/device_kind.h"
#include "cmd/plugin_common/plugin_options.h"
#include "kube/kube_client.h"
#include "ledger/claim_ledger.h"

namespace nvdra::plugin {

struct KindContext {
  const PluginOptions& options;
  std::string plugin_dir;
  devices::DeviceLib& lib;
  const devices::NodeInventory& inventory;
  kube::KubeClient& kube;
  // Opened before the kind: a kind may read what this node held before a
  // restart (claims, not devices: the engine owns the ledger's writes).
  ledger::ClaimLedger& ledger;
};

using KindFactory = std::function<Result<std::unique_ptr<driver::DeviceKind>>(KindContext&)>;

// Runs the plugin until SIGTERM/SIGINT; returns the process exit code.
int RunPlugin(const std::string& program, const std::string& driver, const KindFactory& factory, int argc,
              char** argv);

}  // namespace nvdra::plugin
