// nvdra-cdi-hook: the OCI hook nvdra's CDI specs run (hook.h). Linked
// statically, so the copy the plugins leave on the node runs under any
// host's libc.
#include <iostream>
#include <string>
#include <vector>

#include "cmd/nvdra-cdi-hook/hook.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  return nvdra::cdihook::RunHook(args, std::cin, std::cerr);
}
