// nvdra-gpu-kubelet-plugin: the kubelet plugin of driver gpu.nvidia.com.
#include <chrono>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cmd/plugin_common/plugin_runner.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_kind.h"
#include "gpu/mps_daemon.h"
#include "util/file_util.h"
#include "util/log.h"

namespace {

using namespace nvdra;

// The flags of MPS control daemons (upstream's names and variables).
struct MpsFlags {
  std::string image, pull_secrets, pull_policy, service_account;
  std::string template_path = gpu::kDefaultMpsTemplatePath;

  void Add(CLI::App& app) {
    app.add_option("--image-name", image, "Image of the MPS control daemons (required with MPSSupport)")
        ->envname("IMAGE_NAME");
    app.add_option("--image-pull-secrets", pull_secrets,
                   "Comma-separated imagePullSecret names for the MPS control daemons (empty: none)")
        ->envname("IMAGE_PULL_SECRETS");
    app.add_option("--image-pull-policy", pull_policy,
                   "Image pull policy of the MPS control daemons (empty: the Kubernetes default)")
        ->envname("IMAGE_PULL_POLICY");
    app.add_option("--service-account-name", service_account,
                   "Service account of the MPS control daemons (empty: the Kubernetes default)")
        ->envname("SERVICE_ACCOUNT_NAME");
    app.add_option("--mps-control-daemon-template", template_path,
                   "Deployment template of the MPS control daemons (Go text/template syntax)")
        ->envname("MPS_CONTROL_DAEMON_TEMPLATE")
        ->capture_default_str();
  }
};

// MPS control daemons, when the MPSSupport gate is on: the settings from the
// flags and the node, the Kubernetes calls through the plugin's client, the
// system's mounts. The template is read once here, so a missing one stops
// the start instead of failing every MPS claim.
Status CheckMpsFlags(const MpsFlags& flags, const config::FeatureGates& gates) {
  if (gates.Enabled(config::Gate::kMPSSupport) && flags.image.empty()) {
    return InvalidArgument("--image-name (IMAGE_NAME) is required with featureGates.MPSSupport=true");
  }
  return Status::Ok();
}

Result<gpu::MpsRuntime> MakeMpsRuntime(plugin::KindContext& ctx, const MpsFlags& flags) {
  gpu::MpsRuntime rt;
  if (!ctx.gates.Enabled(config::Gate::kMPSSupport)) return rt;
  NVDRA_RETURN_IF_ERROR(CheckMpsFlags(flags, ctx.gates));
  if (auto text = ReadFileToString(flags.template_path); !text.ok()) {
    return text.status().Wrap("MPS control daemon template");
  }
  gpu::MpsSettings& s = rt.settings;
  s.plugin_dir = ctx.plugin_dir;
  s.template_path = flags.template_path;
  s.node_name = ctx.options.node_name;
  s.ns = ctx.options.namespace_name;
  s.image = flags.image;
  s.image_pull_policy = flags.pull_policy;
  s.service_account = flags.service_account;
  std::string secrets = flags.pull_secrets;
  for (char& c : secrets) c = c == ',' ? ' ' : c;
  std::istringstream words(secrets);
  for (std::string w; words >> w;) s.image_pull_secrets.push_back(w);
  s.host_driver_root = ctx.options.nvidia_driver_root;
  for (const auto& spec : config::FeatureGates::Known()) {
    s.feature_gates[std::string(spec.name)] = ctx.gates.Enabled(spec.gate);
  }
  auto meminfo = ReadFileToString("/proc/meminfo");
  s.shm_size = gpu::ShmSizeFromMeminfo(meminfo.ok() ? *meminfo : "");
  s.shm_mount_path = gpu::ShmMountPathFor(ctx.options.container_driver_root);
  rt.api = gpu::NewKubeMpsDaemonApi(ctx.kube);
  rt.mounter = gpu::NewSystemShmMounter();
  return rt;
}

// The ledger's undo records, which the plug-ins' orphan sweeps read.
gpu::UndoRecords LedgerUndoRecords(plugin::KindContext& ctx) {
  const driver::ClaimsView* claims = &ctx.claims;
  return [claims]() -> Result<std::vector<gpu::HeldRecord>> {
    NVDRA_ASSIGN_OR_RETURN(auto held, claims->HeldClaims());
    std::vector<gpu::HeldRecord> out;
    for (const auto& c : held) out.push_back({c.undo, c.origin});
    return out;
  };
}

// The plug-ins' orphan sweeps (MPS control daemons, dynamic MIG devices,
// GPUs left on vfio-pci, Fabric Manager partitions: each where its gate is
// on) on the plugin's background group, as often as the reconciler runs.
PeriodicWorkerOptions SweepWorker(plugin::KindContext& ctx) {
  PeriodicWorkerOptions o;
  o.period = std::chrono::duration_cast<std::chrono::milliseconds>(ctx.options.reconcile_period);
  o.jitter = 0.1;
  o.group = &ctx.background;
  return o;
}

// With FabricManagerPartitioning: Fabric Manager, where the node has a
// fabric that needs it (its partitions read once, here, so an unreachable
// Fabric Manager stops the start as upstream's does).
Result<std::shared_ptr<gpu::FabricPartitions>> OpenFabricPartitions(plugin::KindContext& ctx) {
  if (!ctx.gates.Enabled(config::Gate::kFabricManagerPartitioning)) return std::shared_ptr<gpu::FabricPartitions>();
  NVDRA_ASSIGN_OR_RETURN(std::unique_ptr<devices::FabricManager> fm, ctx.lib.OpenFabricManager());
  if (fm == nullptr) return std::shared_ptr<gpu::FabricPartitions>();
  auto partitions = gpu::FabricPartitions::Open(std::move(fm));
  if (!partitions.ok()) {
    return partitions.status().Wrap("FabricManagerPartitioning enabled but Fabric Manager could not be opened");
  }
  return std::shared_ptr<gpu::FabricPartitions>(std::move(partitions).value());
}

}  // namespace

int main(int argc, char** argv) {
  // Set by the flags below before the kind is built (flags are parsed first).
  gpu::GpuKindOptions options;
  MpsFlags mps_flags;
  int reset_retry_seconds = 30;
  std::string consumable_shares = "disabled";
  std::string host_root = "/host-root";
  int gpu_free_seconds = 30;
  auto kind_flags = [&](CLI::App& app) {
    app.add_option("--time-slice-reset-attempts", options.resets.max_attempts,
                   "Failed time-slice resets of a GPU an Unprepare reports before the claim is released and the "
                   "GPU is marked unhealthy until a reset succeeds")
        ->envname("NVDRA_TIME_SLICE_RESET_ATTEMPTS")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--time-slice-reset-retry-period", reset_retry_seconds,
                   "Seconds between retries of the time-slice reset a GPU marked unhealthy owes")
        ->envname("NVDRA_TIME_SLICE_RESET_RETRY_PERIOD")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    app.add_option("--consumable-shares", consumable_shares,
                   "Configure consumable shares support ('disabled', 'memory', 'unlimited', or a positive integer); "
                   "needs the ConsumableShares feature gate")
        ->envname("CONSUMABLE_SHARES")
        ->capture_default_str();
    app.add_option("--host-root", host_root,
                   "Where the host's root file system is mounted (PassthroughSupport: modprobe runs there, and the "
                   "processes holding a GPU are looked for in its /proc)")
        ->envname("HOST_ROOT")
        ->capture_default_str();
    app.add_option("--vfio-gpu-free-timeout", gpu_free_seconds,
                   "Seconds a passthrough Prepare waits for the processes holding a GPU to exit before it refuses "
                   "(the kubelet retries)")
        ->envname("NVDRA_VFIO_GPU_FREE_TIMEOUT")
        ->check(CLI::Range(0, 40))
        ->capture_default_str();
    mps_flags.Add(app);
  };
  static const gpu::GpuCheckpointCodec codec;
  return plugin::RunPlugin(
      "nvdra-gpu-kubelet-plugin", codec,
      [&](plugin::KindContext& ctx) -> Result<std::unique_ptr<driver::DeviceKind>> {
        options.reset_retry_period = std::chrono::seconds(reset_retry_seconds);
        options.background = &ctx.background;
        options.gates = ctx.gates;
        NVDRA_ASSIGN_OR_RETURN(options.consumable_shares, gpu::ParseConsumableShares(consumable_shares, ctx.gates));
        options.shared_with_others = gpu::SharedWithOthersIn(ctx.claims);
        // Beside the ledger: owed resets must outlive a restart of the plugin.
        options.resets.state_path = JoinPath(ctx.plugin_dir, "time-slice-resets.json");
        NVDRA_ASSIGN_OR_RETURN(options.mps, MakeMpsRuntime(ctx, mps_flags));
        // MPS is refused while consumable shares are on, as upstream does.
        options.mps.consumable_shares = options.consumable_shares.enabled();
        options.pci = &ctx.lib.pci();
        if (ctx.gates.Enabled(config::Gate::kPassthroughSupport)) {
          NVDRA_ASSIGN_OR_RETURN(options.passthrough,
                                 gpu::PassthroughHostAt(host_root, ctx.lib.driver_root().container_root()));
          options.passthrough.gpu_free_timeout = std::chrono::seconds(gpu_free_seconds);
          options.device_prepared = gpu::DevicePreparedIn(ctx.claims);
        }
        NVDRA_ASSIGN_OR_RETURN(options.fabric, OpenFabricPartitions(ctx));
        auto kind = std::make_unique<gpu::GpuKind>(
            ctx.inventory, gpu::GpuContainerEdits(devices::ContainerSources::ForLib(ctx.lib, ctx.driver_files)),
            ctx.lib.control(), std::move(options));
        kind->StartSweeps(SweepWorker(ctx), LedgerUndoRecords(ctx));
        return std::unique_ptr<driver::DeviceKind>(std::move(kind));
      },
      argc, argv, kind_flags,
      // Before anything is written to disk: the kind's flags that depend on gates.
      [&](const plugin::PluginConfig& config) -> Status {
        NVDRA_RETURN_IF_ERROR(CheckMpsFlags(mps_flags, config.gates));
        return gpu::ParseConsumableShares(consumable_shares, config.gates).status();
      },
      /*follows_driver_reloads=*/true);  // the factory builds the kind again on a new driver
}
