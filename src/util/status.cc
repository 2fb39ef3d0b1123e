#include "util/status.h"

#include "util/log.h"

#include <string_view>

namespace nvdra {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kConflict: return "Conflict";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

namespace status_internal {

Status ResultFromOkStatus(const char* file, int line) {
  std::string_view path(file);
  if (auto slash = path.rfind('/'); slash != std::string_view::npos) path.remove_prefix(slash + 1);
  std::string where = std::string(path) + ":" + std::to_string(line);
  NVDRA_ERROR("Result built from an OK status at {}: reporting it as an Internal error", where);
  return Internal("Result built from an OK status (at " + where + ")");
}

}  // namespace status_internal

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace nvdra
