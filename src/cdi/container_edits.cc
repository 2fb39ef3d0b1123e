#include "cdi/container_edits.h"

#include <algorithm>

namespace nvdra::cdi {

template <typename T>
static void AppendUnique(std::vector<T>& to, const std::vector<T>& from) {
  for (const T& x : from) {
    if (std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
  }
}

void ContainerEdits::Append(const ContainerEdits& other) {
  AppendUnique(env, other.env);
  AppendUnique(device_nodes, other.device_nodes);
  AppendUnique(mounts, other.mounts);
  AppendUnique(hooks, other.hooks);
}

}  // namespace nvdra::cdi
