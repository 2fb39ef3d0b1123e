#include "devices/proc_devices.h"

#include <sstream>

#include "util/file_util.h"

namespace nvdra::devices {

std::map<std::string, int> ParseCharDeviceMajors(const std::string& text) {
  std::map<std::string, int> majors;
  std::istringstream in(text);
  std::string line;
  bool in_char = false;
  while (std::getline(in, line)) {
    if (line.rfind("Character devices:", 0) == 0) {
      in_char = true;
      continue;
    }
    if (line.rfind("Block devices:", 0) == 0) {
      in_char = false;
      continue;
    }
    if (!in_char) continue;
    std::istringstream fields(line);
    int major;
    std::string name;
    if (fields >> major >> name) majors.emplace(name, major);
  }
  return majors;
}

Result<int> ReadCharDeviceMajor(const std::string& path, const std::string& name) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status().Wrap("reading device majors");
  auto majors = ParseCharDeviceMajors(*text);
  auto it = majors.find(name);
  if (it == majors.end()) {
    return NotFound("no character device \"" + name + "\" in " + path +
                    " (is the NVIDIA kernel module that provides it loaded?)");
  }
  return it->second;
}

}  // namespace nvdra::devices
