#include "cmd/nvdractl/commands.h"

namespace nvdra::ctl {

void AddLedgerCommands(CLI::App& app, int& exit_code) {}

}  // namespace nvdra::ctl
