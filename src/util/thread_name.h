// Names the calling thread as `top -H`, `ps -L` and /proc/<pid>/task/*/comm
// show it, so an operator can tell the plugin's threads apart (the kernel
// keeps 15 characters).
#pragma once

#include <pthread.h>

#include <string>
#include <string_view>

namespace nvdra {

inline void SetThreadName(std::string_view name) {
  std::string n(name.substr(0, 15));
  pthread_setname_np(pthread_self(), n.c_str());
}

}  // namespace nvdra
