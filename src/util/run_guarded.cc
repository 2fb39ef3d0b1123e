#include "util/run_guarded.h"

#include <exception>
#include <string>

#include "util/log.h"

namespace nvdra {

std::string DescribeCurrentException() {
  try {
    throw;
  } catch (const std::exception& e) {
    return std::string(e.what());
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

Status EscapedException(std::string_view what) {
  std::string msg = "internal error in " + std::string(what) + ": unexpected exception: " + DescribeCurrentException() +
                    " (this is a bug in the driver; the operation failed and may be retried)";
  NVDRA_ERROR("{}", msg);
  return Internal(std::move(msg));
}

}  // namespace nvdra
