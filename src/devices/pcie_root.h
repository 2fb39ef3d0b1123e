// The PCIe root complex of a PCI device, read from sysfs: the
// resource.kubernetes.io/pcieRoot attribute ("pci0000:3a") that lets users
// pick devices under the same root (e.g. a GPU and a NIC).
#pragma once

#include <optional>
#include <string>

namespace nvdra::devices {

// Resolves <sysfs_root>/bus/pci/devices/<bus_id> and returns the "pciDDDD:BB"
// component that follows "devices/" in its target; nullopt when absent.
std::optional<std::string> PcieRootForBusId(const std::string& sysfs_root, const std::string& bus_id);

}  // namespace nvdra::devices
