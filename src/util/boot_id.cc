#include "util/boot_id.h"

#include "util/file_util.h"

namespace nvdra {

Result<std::string> ReadBootId(const std::string& path) {
  auto content = ReadFileToString(path);
  if (!content.ok()) return content.status().Wrap("read boot id");
  std::string id = *content;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ' || id.back() == '\r')) id.pop_back();
  if (id.empty()) return DataLoss("boot id file " + path + " is empty");
  return id;
}

}  // namespace nvdra
