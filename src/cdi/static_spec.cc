#include "cdi/static_spec.h"

#include <sys/stat.h>

#include "util/file_util.h"

namespace nvdra::cdi {

Status WriteStaticSpec(const std::string& root, const std::string& name, const Spec& spec) {
  if (name.empty() || name.find('/') != std::string::npos || name.front() == '.') {
    return InvalidArgument("CDI spec name \"" + name + "\" is not a file name");
  }
  NVDRA_RETURN_IF_ERROR(ValidateSpec(spec).Wrap("CDI spec " + name));
  const std::string path = JoinPath(root, name + ".json");
  const std::string content = RenderJson(spec);
  auto existing = ReadFileToString(path);
  if (!existing.ok() || *existing != content) {
    NVDRA_RETURN_IF_ERROR(MakeDirectories(root, 0755));
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(path, content, 0644).Wrap("writing CDI spec " + path));
    if (::chmod(path.c_str(), 0644) != 0) return Internal("chmod " + path + ": " + ErrnoText(errno));
  }
  return RemoveFileIfExists(JoinPath(root, name + ".yaml")).Wrap("removing the upstream CDI spec " + name);
}

}  // namespace nvdra::cdi
