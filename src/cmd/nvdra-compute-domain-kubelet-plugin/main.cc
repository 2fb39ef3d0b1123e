// nvdra-compute-domain-kubelet-plugin: the kubelet plugin of driver
// compute-domain.nvidia.com (IMEX channels and daemons).
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cdi/static_spec.h"
#include "cmd/plugin_common/plugin_runner.h"
#include "computedomain/compute_domain_checkpoint_codec.h"
#include "computedomain/compute_domain_edits.h"
#include "computedomain/compute_domain_kind.h"
#include "computedomain/domain_directory.h"
#include "computedomain/domain_maintenance.h"
#include "computedomain/domain_watch.h"
#include "computedomain/fabric_clique.h"
#include "computedomain/imex_mode.h"
#include "computedomain/node_label_manager.h"
#include "config/feature_gates.h"
#include "devices/fabric_manager.h"
#include "util/log.h"

namespace {

using namespace nvdra;

// This plugin's own flags (upstream's names and environment variables).
struct ComputeDomainFlags {
  // Upstream's image ships the template here.
  std::string daemon_config_template = "/templates/compute-domain-daemon-config.tmpl.cfg";
  bool gpu_clique_label = false;  // GPU_CLIQUE_LABEL_ENABLED
  computedomain::ImexConfig imex;
  // nvdra's own: where the IMEX daemons write ComputeDomainCliques; empty:
  // --namespace (upstream's daemons write them in their release's).
  std::string clique_namespace;

  void Add(CLI::App& app) {
    app.add_option("--imex-mode", imex.mode, "IMEX deployment mode: driverManaged or hostManaged.")
        ->envname("IMEX_MODE")
        ->capture_default_str();
    app.add_option("--imex-isolation", imex.isolation,
                   "IMEX isolation strategy: domain (default; all workloads in the same IMEX domain share "
                   "channel 0) or channel (not yet supported).")
        ->envname("IMEX_ISOLATION")
        ->capture_default_str();
    app.add_option("--imex-host-socket-path", imex.host_socket_path,
                   "Path (under the nvidia-driver-root) to the Unix domain socket the host nvidia-imex daemon's "
                   "command/control service listens on. Only used when imex-mode=hostManaged, to validate host "
                   "IMEX readiness during channel allocation.")
        ->envname("IMEX_HOST_SOCKET_PATH")
        ->capture_default_str();
    app.add_option("--compute-domain-daemon-config-template", daemon_config_template,
                   "IMEX daemon config template copied into each domain's directory")
        ->envname("COMPUTE_DOMAIN_DAEMON_CONFIG_TEMPLATE")
        ->capture_default_str();
    app.add_option("--gpu-clique-label-enabled", gpu_clique_label,
                   "Label the node nvidia.com/gpu.clique=<clique> (true/false)")
        ->envname("GPU_CLIQUE_LABEL_ENABLED")
        ->capture_default_str();
    app.add_option("--clique-namespace", clique_namespace,
                   "Namespace of the ComputeDomainCliques the IMEX daemons write (empty: --namespace); the "
                   "upstream release's namespace when its daemons serve the domains")
        ->envname("CLIQUE_NAMESPACE");
  }
};

// The ComputeDomain, clique and Node watches, added to ctx.companions. They
// open only while the node has ComputeDomain work (DomainWatch): at once when
// `busy` says so now (claims prepared before a restart), with up to 10 s for
// the lists (lookups answer "not synced yet", retryable, until then, and a
// slow API server must not hold up registration for long; the wait goes in
// short slices so that a shutdown signal ends it at once); else at the first
// claim's lookup.
computedomain::DomainWatch& MakeWatches(plugin::KindContext& ctx, const config::FeatureGates& gates,
                                        const std::string& clique_id, const std::string& clique_namespace) {
  const plugin::PluginOptions& opts = ctx.options;
  computedomain::DomainWatchOptions wo;
  wo.node_name = opts.node_name;
  wo.clique_namespace = clique_namespace.empty() ? opts.namespace_name : clique_namespace;
  wo.cliques = gates.Enabled(config::Gate::kComputeDomainCliques);
  wo.clique_id = clique_id;
  wo.watch_node = true;
  return ctx.companions.Add(std::make_unique<computedomain::DomainWatch>(ctx.kube, wo));
}

Status OpenWatchesNow(plugin::KindContext& ctx, computedomain::DomainWatch& domains) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    if (int sig = ctx.shutdown.signal(); sig != 0) {
      return Unavailable("startup interrupted by signal " + std::to_string(sig) +
                         " while the ComputeDomain watches synced");
    }
    const auto slice = std::min(deadline, Clock::now() + std::chrono::milliseconds(200));
    if (domains.ActivateAndWait(slice)) return Status::Ok();
    if (Clock::now() >= deadline) {
      NVDRA_WARN("the ComputeDomain watches have not synced within 10 s; claims wait for them");
      return Status::Ok();
    }
  }
}

// Whether the node has ComputeDomain work the watches follow: a claim of
// this node's ledger (whichever plugin process prepared it), a label
// holder, or a daemon directory whose domain may go away. An unreadable
// ledger counts as work.
std::function<bool()> HasComputeDomainWork(const driver::ClaimsView& shared_claims,
                                           computedomain::NodeLabelManager& labels,
                                           const computedomain::DomainDirectories& dirs) {
  return [claims = &shared_claims, labels = &labels, dirs = &dirs] {
    auto held = claims->HeldClaims();
    if (!held.ok() || !held->empty()) return true;
    return !labels->HeldDomains().empty() || dirs->HasAny();
  };
}

// The node's clique from an inventory, under the gates' policy for fabric
// errors (computedomain/fabric_clique.h).
using CliqueOf = std::function<Result<computedomain::CliqueIdentity>(const devices::NodeInventory&)>;

// With FabricManagerPartitioning on a node with a local NVSwitch fabric
// (upstream's single-node NVLink system; /proc/driver and /sys/class are the
// kernel's, alike in every container), GPUs register with the fabric only
// once a partition holding them is activated: a pending registration is no
// error then.
Result<CliqueOf> CliquePolicy(const config::FeatureGates& gates) {
  const bool crash = gates.Enabled(config::Gate::kCrashOnNVLinkFabricErrors);
  bool fm_partitions = false;
  if (gates.Enabled(config::Gate::kFabricManagerPartitioning)) {
    auto fabric = devices::HasFabricManagerFabric("/proc", "/sys");
    if (!fabric.ok()) return fabric.status().Wrap("error checking if node is single-node NVLink system");
    fm_partitions = *fabric;
  }
  return CliqueOf([crash, fm_partitions](const devices::NodeInventory& inv) {
    return computedomain::IdentifyNodeClique(inv, crash, fm_partitions);
  });
}

// The domain upkeep: follows a repartitioned fabric, the node label and the
// domain directories, on the plugin's background group.
void StartMaintenance(plugin::KindContext& ctx, const ComputeDomainFlags& flags, CliqueOf identify,
                      computedomain::DomainWatch& domains, computedomain::NodeLabelManager& labels,
                      computedomain::DomainDirectories& dirs, std::function<bool()> busy) {
  const plugin::PluginOptions& opts = ctx.options;
  computedomain::DomainMaintenanceOptions mo;
  mo.period = std::chrono::duration_cast<std::chrono::milliseconds>(opts.reconcile_period);
  mo.node_name = opts.node_name;
  mo.gpu_clique_label = flags.gpu_clique_label;
  mo.repair_node_label = !flags.imex.host_managed();
  mo.group = &ctx.background;
  mo.busy = std::move(busy);
  mo.watch_linger = std::max(std::chrono::milliseconds(std::chrono::minutes(10)), 2 * mo.period);
  devices::DeviceLib* lib = &ctx.lib;
  mo.read_clique = [lib, identify]() -> Result<std::string> {
    NVDRA_ASSIGN_OR_RETURN(auto inv, lib->Discover());
    NVDRA_ASSIGN_OR_RETURN(auto identity, identify(inv));
    return identity.clique_id;
  };
  auto& maintenance = ctx.companions.Add(std::make_unique<computedomain::DomainMaintenance>(ctx.kube, domains, labels,
                                                                                            dirs, mo));
  maintenance.Start();
}

// What the kind relies on beside the engine (the watches, the node label,
// the domain directories and their upkeep): built with the first kind and
// kept by every kind built on a new driver after a reload, so that a reload
// neither reopens the watches nor forgets which claims hold the label.
struct DomainParts {
  CliqueOf identify;
  computedomain::DomainWatch* domains = nullptr;
  computedomain::NodeLabelManager* labels = nullptr;
  computedomain::DomainDirectories* dirs = nullptr;
  std::function<bool()> busy;
  int imex_major = 0;  // the channels' major the last kind was built with; 0: none read
};

// Each part joins ctx.companions as it is built, so the plugin stops them
// right after the kind, the last started first (maintenance, then the
// watches), and destroys them before the client and hardware go away.
Status SetUpDomainParts(plugin::KindContext& ctx, const ComputeDomainFlags& flags, const config::FeatureGates& gates,
                        const std::string& clique_id, DomainParts& parts) {
  const plugin::PluginOptions& opts = ctx.options;
  computedomain::DomainWatch& domains = MakeWatches(ctx, gates, clique_id, flags.clique_namespace);
  auto& labels = ctx.companions.Keep(std::make_unique<computedomain::NodeLabelManager>(ctx.kube, opts.node_name,
                                                                                       domains.node(),
                                                                                       opts.completed_claim_grace));
  // Label ownership follows the ledger every plugin process of this node
  // shares, so a rolling update's old instance never removes the label of
  // a claim the new one prepared (nor the other way round).
  const driver::ClaimsView* shared_claims = &ctx.claims;
  labels.SetSharedHolders([shared_claims]() -> Result<computedomain::LabelHolders> {
    NVDRA_ASSIGN_OR_RETURN(auto held, shared_claims->HeldClaims());
    return computedomain::ComputeDomainKind::LabelHoldersOf(held);
  });
  auto& dirs = ctx.companions.Keep(std::make_unique<computedomain::DomainDirectories>(ctx.plugin_dir,
                                                                                      flags.daemon_config_template));
  parts.domains = &domains;
  parts.labels = &labels;
  parts.dirs = &dirs;
  parts.busy = HasComputeDomainWork(ctx.claims, labels, dirs);
  if (parts.busy()) NVDRA_RETURN_IF_ERROR(OpenWatchesNow(ctx, domains));
  return Status::Ok();
}

// The major nvidia-caps-imex-channels has in /proc/devices now: read again
// for every kind, as a driver reload may give it another one (the channel
// nodes are then re-created with it as the claims' specs are rewritten).
void NoteImexChannelsMajor(const computedomain::ComputeDomainEdits& edits, DomainParts& parts) {
  auto major = edits.imex_channels().Major();
  if (!major.ok()) {
    NVDRA_VLOG(2, "IMEX channels: {}", major.status().message());
    return;
  }
  if (parts.imex_major != 0 && parts.imex_major != *major) {
    NVDRA_INFO("IMEX channels: nvidia-caps-imex-channels has major {} now (was {}); channel nodes and claim specs "
               "follow it",
               *major, parts.imex_major);
  } else if (parts.imex_major == 0) {
    NVDRA_INFO("IMEX channels: nvidia-caps-imex-channels has major {}", *major);
  }
  parts.imex_major = *major;
}

// Claims this node held before the restart keep holding the label.
Status AdoptHeldClaims(const driver::ClaimsView& claims, computedomain::ComputeDomainKind& kind) {
  NVDRA_ASSIGN_OR_RETURN(auto held, claims.HeldClaims());
  for (const auto& c : held) {
    std::vector<std::string> devices = c.devices;
    for (const auto& a : c.allocation) devices.push_back(a.device);
    kind.Adopt(c.uid, c.undo, devices);
  }
  return Status::Ok();
}

// Called at start and, after a driver reload, again on the new driver
// (`parts` then holds what the first call built).
Result<std::unique_ptr<driver::DeviceKind>> MakeKind(plugin::KindContext& ctx, const ComputeDomainFlags& flags,
                                                     DomainParts& parts) {
  const plugin::PluginOptions& opts = ctx.options;
  const bool first = parts.domains == nullptr;
  NVDRA_ASSIGN_OR_RETURN(config::FeatureGates gates, config::FeatureGates::Parse(opts.feature_gates));
  NVDRA_RETURN_IF_ERROR(computedomain::ValidateImexConfig(flags.imex,
                                                          gates.Enabled(config::Gate::kHostManagedIMEXDaemon))
                            .Wrap("imex configuration validation failed"));
  const bool host_managed = flags.imex.host_managed();
  if (host_managed && first) {
    NVDRA_INFO("IMEX is host-managed: channel claims wait for the host's nvidia-imex ({}), the node gets no "
               "ComputeDomain label, and daemon claims are refused",
               flags.imex.host_socket_path);
  }
  if (first) {
    NVDRA_ASSIGN_OR_RETURN(parts.identify, CliquePolicy(gates));
  }
  NVDRA_ASSIGN_OR_RETURN(computedomain::CliqueIdentity clique, parts.identify(ctx.inventory));
  if (!clique.warning.empty()) NVDRA_WARN("{}", clique.warning);
  NVDRA_INFO("{}", computedomain::CliqueLogLine(clique));
  // DNS-named IMEX daemons are the driver's own daemons: no check when the
  // host runs nvidia-imex (upstream).
  NVDRA_ASSIGN_OR_RETURN(
      std::string validated,
      computedomain::ValidateDriverVersion(ctx.inventory.driver_version,
                                           !host_managed && gates.Enabled(config::Gate::kIMEXDaemonsWithDNSNames)));
  NVDRA_INFO("{}", validated);
  if (first) NVDRA_RETURN_IF_ERROR(SetUpDomainParts(ctx, flags, gates, clique.clique_id, parts));

  computedomain::ComputeDomainKindOptions ko;
  ko.plugin_dir = ctx.plugin_dir;
  ko.clique_id = clique.clique_id;
  // The base spec (k8s.compute-domain.nvidia.com-device_base) daemon claims
  // get next to their own device, rewritten at every start, on every new
  // driver and when the driver's or the toolkit's files change.
  const std::string vendor = std::string("k8s.") + computedomain::kDriverName;
  ctx.static_specs = [root = ctx.cdi.root(), vendor,
                      sources = devices::ContainerSources::ForLib(ctx.lib, ctx.driver_files)]() -> Status {
    NVDRA_ASSIGN_OR_RETURN(auto base, computedomain::ComputeDomainEdits(sources).BaseSpec(vendor));
    return cdi::WriteStaticSpec(root, vendor + "-device_base", base).Wrap("CDI base spec");
  };
  NVDRA_RETURN_IF_ERROR(ctx.static_specs());
  ko.base_device_id = vendor + "/device=all";
  // The maintenance pass follows a repartitioned fabric in the watch; the
  // kind reads it from there (the watch outlives the kind).
  computedomain::DomainWatch* watch = parts.domains;
  ko.clique_source = [watch] { return watch->clique_id(); };
  if (host_managed) {
    ko.host_managed_imex = true;
    auto probe = std::make_shared<computedomain::HostImexProbe>(ctx.lib.driver_root().container_root(),
                                                                flags.imex.host_socket_path);
    ko.host_imex_ready = [probe] { return probe->CheckReady(); };
  }
  computedomain::ComputeDomainEdits edits(devices::ContainerSources::ForLib(ctx.lib));
  NoteImexChannelsMajor(edits, parts);
  auto kind = std::make_unique<computedomain::ComputeDomainKind>(ko, std::move(edits), *parts.domains,
                                                                 host_managed ? nullptr : parts.labels, parts.dirs);
  if (!first) return std::unique_ptr<driver::DeviceKind>(std::move(kind));
  // Claims this node held before the restart keep holding the label (the
  // label manager outlives a reload, and with it what it was told).
  NVDRA_RETURN_IF_ERROR(AdoptHeldClaims(ctx.claims, *kind));
  StartMaintenance(ctx, flags, parts.identify, *parts.domains, *parts.labels, *parts.dirs, parts.busy);
  return std::unique_ptr<driver::DeviceKind>(std::move(kind));
}

}  // namespace

int main(int argc, char** argv) {
  ComputeDomainFlags flags;
  DomainParts parts;
  static const computedomain::ComputeDomainCheckpointCodec codec;
  return plugin::RunPlugin(
      "nvdra-compute-domain-kubelet-plugin", codec,
      [&](plugin::KindContext& ctx) { return MakeKind(ctx, flags, parts); }, argc, argv,
      [&flags](CLI::App& app) { flags.Add(app); },
      // Before anything is written to disk (MakeKind checks it again).
      [&flags](const plugin::PluginConfig& config) {
        return computedomain::ValidateImexConfig(flags.imex, config.gates.Enabled(config::Gate::kHostManagedIMEXDaemon))
            .Wrap("imex configuration validation failed");
      },
      // The channels, the base spec and the claims' specs follow a reload
      // of the NVIDIA driver (--driver-watch).
      /*follows_driver_reloads=*/true);
}
