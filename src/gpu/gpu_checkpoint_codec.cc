#include "gpu/gpu_checkpoint_codec.h"

#include <map>

#include "gpu/gpu_device_types.h"
#include "ledger/go_json.h"

namespace nvdra::gpu {

std::string GpuCheckpointCodec::driver_name() const { return kDriverName; }

std::optional<std::string> GpuCheckpointCodec::UpstreamPreparedDevices(const ledger::ClaimEntry& e) const {
  // The Go driver's undo of time-slicing needs each GPU's UUID.
  std::map<std::string, std::string> uuids;
  if (e.undo.is_object()) {
    for (const auto& ts : e.undo.value("timeSlicing", nlohmann::json::array())) {
      if (ts.is_object()) uuids[ts.value("device", "")] = ts.value("uuid", "");
    }
  }
  std::string devs;
  for (const auto& d : e.prepared) {
    // Only full GPUs: the Go driver's MIG groups need facts this driver does not record.
    if (d.device.rfind("gpu-", 0) != 0 || d.device.find("-mig-") != std::string::npos) return std::nullopt;
    if (!devs.empty()) devs += ",";
    devs += "{\"gpu\":{\"info\":{\"uuid\":" + ledger::GoString(uuids[d.device]) +
            "},\"device\":" + ledger::GoCheckpointedDevice(d) + "},\"mig\":null}";
  }
  return "[{\"devices\":[" + devs + "],\"configState\":{\"mpsControlDaemonID\":\"\"}}]";
}

}  // namespace nvdra::gpu
