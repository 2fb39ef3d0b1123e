#include "devices/device_lib.h"

#include "devices/mock_device_lib.h"
#include "devices/nvml_device_lib.h"

namespace nvdra::devices {

Result<std::unique_ptr<DeviceLib>> OpenDeviceLib(const DeviceLibOptions& options) {
  if (!options.mock_hardware.empty()) {
    if (options.mock_root.empty()) {
      return InvalidArgument("--mock-hardware needs a directory for the mock driver root");
    }
    NVDRA_ASSIGN_OR_RETURN(XidPolicy xids, XidPolicy::WithAdditional(options.additional_xids_to_ignore));
    NVDRA_ASSIGN_OR_RETURN(MockProfile profile, LoadMockProfile(options.mock_hardware));
    NVDRA_ASSIGN_OR_RETURN(auto lib, MockDeviceLib::Create(std::move(profile), options.mock_root, std::move(xids)));
    return std::unique_ptr<DeviceLib>(std::move(lib));
  }
  NVDRA_ASSIGN_OR_RETURN(auto lib, NvmlDeviceLib::Open(options));
  return std::unique_ptr<DeviceLib>(std::move(lib));
}

}  // namespace nvdra::devices
