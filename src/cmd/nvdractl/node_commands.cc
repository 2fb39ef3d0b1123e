// `nvdractl node remove-clique-labels`: what the chart's pre-delete hook runs
// when nvdra is uninstalled. The compute-domain plugin labels its node
// nvidia.com/gpu.clique (GPU_CLIQUE_LABEL_ENABLED), and a plugin stopping
// cannot tell an uninstall from a restart, so the label would outlive the
// driver; this removes every such label nvdra wrote, and none that
// gpu-feature-discovery wrote.
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cmd/nvdractl/commands.h"
#include "computedomain/clique_label.h"
#include "kube/kube_flags.h"

namespace nvdra::ctl {

void AddNodeCommands(CLI::App& app, int& exit_code) {
  auto* group = app.add_subcommand("node", "change what nvdra wrote on the cluster's Nodes");
  group->require_subcommand(1);
  auto flags = std::make_shared<kube::KubeFlags>();
  auto* remove = group->add_subcommand(
      "remove-clique-labels",
      std::string("Remove the ") + computedomain::kGpuCliqueLabel +
          " label from every Node whose label the compute-domain plugin wrote (the Node carries the " +
          computedomain::kGpuCliqueLabelOwner +
          " annotation), and that annotation. The chart runs it before an uninstall.\n"
          "Output: {\"removed\": [node names]}.\n"
          "Exit status: 0 done; 1 some Node could not be changed (named on stderr); 2 bad arguments or no API "
          "server.");
  kube::AddKubeFlags(*remove, *flags);
  remove->callback([flags, &exit_code] {
    auto client = kube::NewKubeClient(*flags);
    if (!client.ok()) {
      std::cerr << "nvdractl node remove-clique-labels: " << client.status().ToString() << "\n";
      exit_code = 2;
      return;
    }
    auto removed = computedomain::RemoveOwnedCliqueLabels(**client);
    if (!removed.ok()) {
      std::cerr << "nvdractl node remove-clique-labels: " << removed.status().ToString() << "\n";
      exit_code = 1;
      return;
    }
    std::cout << nlohmann::json{{"removed", *removed}}.dump() << "\n";
  });
}

}  // namespace nvdra::ctl
