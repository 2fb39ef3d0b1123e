#include "cmd/nvdractl/commands.h"

namespace nvdra::ctl {

void AddKubeletCommands(CLI::App& app, int& exit_code) {}

}  // namespace nvdra::ctl
