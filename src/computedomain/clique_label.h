// The node label nvidia.com/gpu.clique as nvdra owns it. gpu-feature-discovery
// sets the same label, so nvdra marks a node whose label it wrote with an
// annotation, and removes only a label so marked: when GPU_CLIQUE_LABEL_ENABLED
// is turned off (the plugin, for its own node) and when the chart is
// uninstalled (`nvdractl node remove-clique-labels`, for every node).
#pragma once

#include <string>
#include <vector>

#include "kube/kube_client.h"
#include "util/status.h"

namespace nvdra::computedomain {

inline constexpr const char* kGpuCliqueLabel = "nvidia.com/gpu.clique";
inline constexpr const char* kGpuCliqueLabelOwner = "compute-domain.nvidia.com/gpu-clique-label-owner";

// Removes the label and the mark from `node` (a Node object as the API
// server shows it) when the mark is there. True: it was, and both are gone.
Result<bool> RemoveOwnedCliqueLabel(kube::KubeClient& client, const nlohmann::json& node);

// The same for the node named `node_name`, read first.
Result<bool> RemoveOwnedCliqueLabel(kube::KubeClient& client, const std::string& node_name);

// The same for every node that carries the label: the names of the nodes
// whose label was removed. A node that fails is named in the error, after
// every other node was tried.
Result<std::vector<std::string>> RemoveOwnedCliqueLabels(kube::KubeClient& client);

}  // namespace nvdra::computedomain
