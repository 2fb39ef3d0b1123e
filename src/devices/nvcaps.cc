#include "devices/nvcaps.h"

#include <sstream>

#include "util/file_util.h"
#include "util/parse_number.h"

namespace nvdra::devices {

Result<NvcapAccess> ParseNvcapAccess(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  bool have_minor = false, have_mode = false;
  NvcapAccess a;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    std::string_view value = TrimSpace(std::string_view(line).substr(colon + 1));
    if (key == "DeviceFileMinor") {
      Result<int32_t> minor = ParseInt32(value);
      if (!minor.ok()) return InvalidArgument("bad value in nvcaps access line \"" + line + "\"");
      a.minor = *minor;
      have_minor = true;
    }
    if (key == "DeviceFileMode") {
      // Decimal, as the driver prints it (e.g. 292 for 0444).
      Result<uint32_t> mode = ParseUint32(value);
      if (!mode.ok()) return InvalidArgument("bad value in nvcaps access line \"" + line + "\"");
      a.mode = *mode;
      have_mode = true;
    }
  }
  if (!have_minor || !have_mode) {
    return InvalidArgument("nvcaps access file lacks DeviceFileMinor or DeviceFileMode");
  }
  return a;
}

Result<NvcapAccess> ReadNvcapAccess(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status().Wrap("reading nvcaps access file");
  auto a = ParseNvcapAccess(*text);
  if (!a.ok()) return a.status().Wrap(path);
  return a;
}

std::string MigGiAccessPath(int gpu_minor, int gi) {
  return "gpu" + std::to_string(gpu_minor) + "/mig/gi" + std::to_string(gi) + "/access";
}

std::string MigCiAccessPath(int gpu_minor, int gi, int ci) {
  return "gpu" + std::to_string(gpu_minor) + "/mig/gi" + std::to_string(gi) + "/ci" + std::to_string(ci) + "/access";
}

}  // namespace nvdra::devices
