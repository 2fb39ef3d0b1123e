// nvdra-gpu-kubelet-plugin: the kubelet plugin of driver gpu.nvidia.com.
#include <CLI/CLI.hpp>

#include "cmd/plugin_common/plugin_runner.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_kind.h"
#include "util/file_util.h"

int main(int argc, char** argv) {
  using namespace nvdra;
  // Set by the flags below before the kind is built (flags are parsed first).
  gpu::GpuKindOptions options;
  int reset_retry_seconds = 30;
  std::string consumable_shares = "disabled";
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
  };
  static const gpu::GpuCheckpointCodec codec;
  return plugin::RunPlugin(
      "nvdra-gpu-kubelet-plugin", codec,
      [&](plugin::KindContext& ctx) -> Result<std::unique_ptr<driver::DeviceKind>> {
        options.reset_retry_period = std::chrono::seconds(reset_retry_seconds);
        options.gates = ctx.gates;
        NVDRA_ASSIGN_OR_RETURN(options.consumable_shares, gpu::ParseConsumableShares(consumable_shares, ctx.gates));
        options.shared_with_others = gpu::SharedWithOthersIn(ctx.ledger);
        // Beside the ledger: owed resets must outlive a restart of the plugin.
        options.resets.state_path = JoinPath(ctx.plugin_dir, "time-slice-resets.json");
        return std::unique_ptr<driver::DeviceKind>(std::make_unique<gpu::GpuKind>(
            ctx.inventory, gpu::GpuContainerEdits(devices::ContainerSources::ForLib(ctx.lib, ctx.driver_files)), ctx.lib.control(), options));
      },
      argc, argv, kind_flags);
}
