#include "devices/gpu_control.h"

namespace nvdra::devices {

Status ValidateTimeSlice(int interval) {
  if (interval < 0 || interval > 3) {
    return InvalidArgument("time-slice interval " + std::to_string(interval) +
                           " is out of range (0 Default, 1 Short, 2 Medium, 3 Long)");
  }
  return Status::Ok();
}

Status ValidateComputeMode(const std::string& mode) {
  if (mode == "DEFAULT" || mode == "EXCLUSIVE_PROCESS" || mode == "PROHIBITED") return Status::Ok();
  return InvalidArgument("compute mode \"" + mode + "\" is not one of DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED");
}

namespace {
Status NoDynamicMig() { return FailedPrecondition("this device backend cannot create or destroy MIG devices"); }
}  // namespace

Result<bool> GpuControl::MigModeEnabled(const std::string&) { return NoDynamicMig(); }
Status GpuControl::SetMigMode(const std::string&, bool) { return NoDynamicMig(); }
Result<std::vector<MigInstance>> GpuControl::ListMigInstances(const std::string&) { return NoDynamicMig(); }
Result<MigInstance> GpuControl::CreateMigInstance(const std::string&, int, int, int) { return NoDynamicMig(); }
Status GpuControl::DestroyMigInstance(const std::string&, int, int) { return NoDynamicMig(); }
Status GpuControl::SetPersistenceMode(const std::string&, bool) {
  return FailedPrecondition("this device backend cannot change a GPU's persistence mode");
}

}  // namespace nvdra::devices
