#include "devices/backends/open_device_lib.h"

#include "devices/mock/mock_device_lib.h"
#include "devices/nvml/nvml_device_lib.h"

namespace nvdra::devices {

Result<std::unique_ptr<DeviceLib>> OpenDeviceLib(const DeviceLibOptions& options) {
  if (!options.mock_hardware.empty()) {
    if (options.mock_root.empty()) {
      return InvalidArgument("--mock-hardware needs a directory for the mock driver root");
    }
    NVDRA_ASSIGN_OR_RETURN(XidPolicy xids, XidPolicy::WithAdditional(options.additional_xids_to_ignore));
    NVDRA_ASSIGN_OR_RETURN(MockProfile profile, LoadMockProfile(options.mock_hardware));
    NVDRA_ASSIGN_OR_RETURN(MockLayout layout, ParseMockLayout(options.mock_layout));
    if (layout == MockLayout::kGpuOperator) {
      // The node's driver root mounted where the plugin's container has the
      // real one is seen by the host at --nvidia-driver-root.
      NVDRA_ASSIGN_OR_RETURN(auto lib, MockDeviceLib::Create(std::move(profile), options.mock_root, std::move(xids),
                                                             {.layout = layout,
                                                              .container_driver_root = options.container_driver_root,
                                                              .host_driver_root = options.host_driver_root}));
      return std::unique_ptr<DeviceLib>(std::move(lib));
    }
    // A mock driver root kept where the real one is mounted in a container
    // (--mock-state-dir equal to --container-driver-root) is seen by the host
    // at --nvidia-driver-root, like a real one: CDI specs then name host paths.
    DriverRoot mounted(options.container_driver_root, options.host_driver_root);
    std::string host_root = DriverRoot(options.mock_root, "/").container_root() == mounted.container_root()
                                ? mounted.host_root()
                                : "";
    NVDRA_ASSIGN_OR_RETURN(auto lib,
                           MockDeviceLib::Create(std::move(profile), options.mock_root, std::move(xids), host_root));
    return std::unique_ptr<DeviceLib>(std::move(lib));
  }
  NVDRA_ASSIGN_OR_RETURN(auto lib, NvmlDeviceLib::Open(options));
  return std::unique_ptr<DeviceLib>(std::move(lib));
}

}  // namespace nvdra::devices
