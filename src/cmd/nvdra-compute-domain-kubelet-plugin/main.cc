// nvdra-compute-domain-kubelet-plugin: the kubelet plugin of driver
// compute-domain.nvidia.com (IMEX channels and daemons).
#include "cdi/static_spec.h"
#include "cmd/plugin_common/plugin_runner.h"
#include "computedomain/compute_domain_kind.h"
#include "computedomain/kube_compute_domain_source.h"
#include "devices/device_edits.h"

int main(int argc, char** argv) {
  using namespace nvdra;
  std::unique_ptr<computedomain::KubeComputeDomainSource> domains;
  return plugin::RunPlugin(
      "nvdra-compute-domain-kubelet-plugin", computedomain::kDriverName,
      [&domains](plugin::KindContext& ctx) -> Result<std::unique_ptr<driver::DeviceKind>> {
        domains = std::make_unique<computedomain::KubeComputeDomainSource>(ctx.kube, ctx.options.node_name);
        computedomain::ComputeDomainKindOptions o;
        o.plugin_dir = ctx.plugin_dir;
        o.clique_id = ctx.inventory.clique_id;
        // The base spec (k8s.compute-domain.nvidia.com-device_base) daemon
        // claims get next to their own device, rewritten at every start.
        const std::string vendor = std::string("k8s.") + computedomain::kDriverName;
        auto base = devices::DeviceEdits::ForLib(ctx.lib, ctx.driver_files).BaseSpec(vendor);
        if (!base.ok()) return base.status().Wrap("CDI base spec");
        NVDRA_RETURN_IF_ERROR(cdi::WriteStaticSpec(ctx.cdi.root(), vendor + "-device_base", *base));
        o.base_device_id = vendor + "/device=all";
        return std::unique_ptr<driver::DeviceKind>(std::make_unique<computedomain::ComputeDomainKind>(
            o, devices::DeviceEdits::ForLib(ctx.lib), *domains));
      },
      argc, argv);
}
