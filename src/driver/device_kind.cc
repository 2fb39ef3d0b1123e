#include "driver/device_kind.h"

#include "util/log.h"

namespace nvdra::driver {

bool SkipUnreadableUndo(const std::string& claim_uid, const Status& decoded) {
  if (decoded.ok()) return false;
  NVDRA_WARN("claim {}: skipping an undo record this version does not understand: {}", claim_uid, decoded.message());
  return true;
}

}  // namespace nvdra::driver
