#include "cmd/plugin_common/driver_params.h"

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "util/file_util.h"

namespace nvdra::plugin {

std::optional<std::string> ParamsWithDeviceFilesUnmodified(const std::string& params) {
  std::istringstream in(params);
  std::string out;
  bool changed = false;
  for (std::string line; std::getline(in, line);) {
    // The exact line, as upstream's sed matches it.
    if (line == "ModifyDeviceFiles: 1") {
      line = "ModifyDeviceFiles: 0";
      changed = true;
    }
    out += line + "\n";
  }
  if (!changed) return std::nullopt;
  return out;
}

Result<MaskResult> MaskDriverParams(const std::string& params_path, const std::string& copy_path) {
  if (!PathExists(params_path)) return MaskResult::kNoDriver;
  NVDRA_ASSIGN_OR_RETURN(std::string params, ReadFileToString(params_path));
  std::optional<std::string> masked = ParamsWithDeviceFilesUnmodified(params);
  if (!masked) return MaskResult::kAlreadyMasked;
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(copy_path, *masked, 0444).Wrap("write the masked driver params"));
  if (::mount(copy_path.c_str(), params_path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    int err = errno;
    return Internal("mount " + copy_path + " over " + params_path + ": " + std::strerror(err));
  }
  return MaskResult::kMasked;
}

}  // namespace nvdra::plugin
