// Topology of a PCI device, read from sysfs: its PCIe root complex, the
// resource.kubernetes.io/pcieRoot attribute ("pci0000:3a") that lets users
// pick devices under the same root (e.g. a GPU and a NIC), and its NUMA
// node, the resource.kubernetes.io/numaNode attribute.
#pragma once

#include <optional>
#include <string>

namespace nvdra::devices {

// Resolves <sysfs_root>/bus/pci/devices/<bus_id> and returns the "pciDDDD:BB"
// component that follows "devices/" in its target; nullopt when absent.
std::optional<std::string> PcieRootForBusId(const std::string& sysfs_root, const std::string& bus_id);

// The NUMA node of a PCI device, as upstream reads it: the integer in
// <sysfs_root>/bus/pci/devices/<bus_id>/numa_node; nullopt when the file is
// absent or unreadable, or says -1 (no NUMA affinity) or anything negative.
std::optional<int> NumaNodeForBusId(const std::string& sysfs_root, const std::string& bus_id);

}  // namespace nvdra::devices
