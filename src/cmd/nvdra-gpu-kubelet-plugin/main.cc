// nvdra-gpu-kubelet-plugin: the kubelet plugin of driver gpu.nvidia.com.
#include "cmd/plugin_common/plugin_runner.h"
#include "devices/device_edits.h"
#include "gpu/gpu_kind.h"
#include "util/file_util.h"

int main(int argc, char** argv) {
  using namespace nvdra;
  return plugin::RunPlugin(
      "nvdra-gpu-kubelet-plugin", gpu::kDriverName,
      [](plugin::KindContext& ctx) -> Result<std::unique_ptr<driver::DeviceKind>> {
        gpu::GpuKindOptions options;
        // Beside the ledger: owed resets must outlive a restart of the plugin.
        options.resets.state_path = JoinPath(ctx.plugin_dir, "time-slice-resets.json");
        return std::unique_ptr<driver::DeviceKind>(std::make_unique<gpu::GpuKind>(
            ctx.inventory, devices::DeviceEdits::ForLib(ctx.lib, ctx.driver_files), ctx.lib.control(),
            std::move(options)));
      },
      argc, argv);
}
