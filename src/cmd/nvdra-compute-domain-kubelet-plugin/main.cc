// nvdra-compute-domain-kubelet-plugin: the kubelet plugin of driver
// compute-domain.nvidia.com (IMEX channels and daemons).
#include <chrono>
#include <memory>

#include "cmd/plugin_common/plugin_runner.h"
#include "computedomain/compute_domain_kind.h"
#include "computedomain/domain_directory.h"
#include "computedomain/domain_maintenance.h"
#include "computedomain/domain_watch.h"
#include "computedomain/fabric_clique.h"
#include "computedomain/node_label_manager.h"
#include "config/feature_gates.h"
#include "devices/device_edits.h"
#include "kube/watch_cache.h"
#include "util/log.h"

namespace {

using namespace nvdra;

// What the ComputeDomain kind needs beside the engine, alive for the whole
// process: the watches, the node label, the domain directories and their
// upkeep.
struct ComputeDomainParts {
  std::unique_ptr<computedomain::DomainWatch> domains;
  std::unique_ptr<kube::WatchCache> node;
  std::unique_ptr<computedomain::NodeLabelManager> labels;
  std::unique_ptr<computedomain::DomainDirectories> dirs;
  std::unique_ptr<computedomain::DomainMaintenance> maintenance;
  ~ComputeDomainParts() {
    if (maintenance) maintenance->Stop();
    if (domains) domains->Stop();
    if (node) node->Stop();
  }
};

Result<std::unique_ptr<driver::DeviceKind>> MakeKind(plugin::KindContext& ctx, ComputeDomainParts& parts) {
  const plugin::PluginOptions& opts = ctx.options;
  NVDRA_ASSIGN_OR_RETURN(config::FeatureGates gates, config::FeatureGates::Parse(opts.feature_gates));
  spdlog::info("{}", computedomain::CliqueLogLine({ctx.inventory.clique_id, ""}));
  NVDRA_ASSIGN_OR_RETURN(std::string validated,
                         computedomain::ValidateDriverVersion(ctx.inventory.driver_version,
                                                              gates.Enabled(config::Gate::kIMEXDaemonsWithDNSNames)));
  spdlog::info("{}", validated);

  computedomain::DomainWatchOptions wo;
  wo.node_name = opts.node_name;
  wo.driver_namespace = opts.namespace_name;
  wo.cliques = gates.Enabled(config::Gate::kComputeDomainCliques);
  wo.clique_id = ctx.inventory.clique_id;
  parts.domains = std::make_unique<computedomain::DomainWatch>(ctx.kube, wo);
  kube::WatchCacheOptions no;
  no.path = "/api/v1/nodes";
  no.field_selector = "metadata.name=" + opts.node_name;
  no.what = "Node " + opts.node_name;
  parts.node = std::make_unique<kube::WatchCache>(ctx.kube, no);
  parts.domains->Start();
  parts.node->Start();
  // Lookups answer "not synced yet" (retryable) until then; don't hold up
  // registration for long on a slow API server.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  if (!parts.domains->WaitSynced(deadline) || !parts.node->WaitSynced(deadline)) {
    spdlog::warn("the ComputeDomain watches have not synced within 10 s; claims wait for them");
  }
  parts.labels = std::make_unique<computedomain::NodeLabelManager>(ctx.kube, opts.node_name, parts.node.get(),
                                                                   opts.completed_claim_grace);
  parts.dirs = std::make_unique<computedomain::DomainDirectories>(ctx.plugin_dir,
                                                                  opts.compute_domain_daemon_config_template);

  computedomain::ComputeDomainKindOptions ko;
  ko.plugin_dir = ctx.plugin_dir;
  ko.clique_id = ctx.inventory.clique_id;
  // The maintenance pass follows a repartitioned fabric in the watch; the
  // kind reads it from there (the watch outlives the kind).
  computedomain::DomainWatch* watch = parts.domains.get();
  ko.clique_source = [watch] { return watch->clique_id(); };
  auto kind = std::make_unique<computedomain::ComputeDomainKind>(ko, devices::DeviceEdits::ForLib(ctx.lib),
                                                                 *parts.domains, parts.labels.get(),
                                                                 parts.dirs.get());
  // Claims this node held before the restart keep holding the label.
  NVDRA_ASSIGN_OR_RETURN(auto entries, ctx.ledger.List());
  for (const auto& e : entries) {
    if (ledger::HoldsResources(e.state)) {
      kind->Adopt(e.uid, e.undo);
    }
  }

  computedomain::DomainMaintenanceOptions mo;
  mo.period = std::chrono::duration_cast<std::chrono::milliseconds>(opts.reconcile_period);
  mo.node_name = opts.node_name;
  mo.gpu_clique_label = opts.gpu_clique_label;
  devices::DeviceLib* lib = &ctx.lib;
  mo.read_clique = [lib]() -> Result<std::string> {
    NVDRA_ASSIGN_OR_RETURN(auto inv, lib->Discover());
    return inv.clique_id;
  };
  parts.maintenance = std::make_unique<computedomain::DomainMaintenance>(ctx.kube, *parts.domains, *parts.labels,
                                                                         *parts.dirs, mo);
  parts.maintenance->Start();
  return std::unique_ptr<driver::DeviceKind>(std::move(kind));
}

}  // namespace

int main(int argc, char** argv) {
  ComputeDomainParts parts;
  return plugin::RunPlugin(
      "nvdra-compute-domain-kubelet-plugin", computedomain::kDriverName,
      [&parts](plugin::KindContext& ctx) { return MakeKind(ctx, parts); }, argc, argv);
}
