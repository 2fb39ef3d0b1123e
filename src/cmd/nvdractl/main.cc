#include <iostream>

#include "cmd/nvdractl/commands.h"
#include "util/log.h"

int main(int argc, char** argv) {
  CLI::App app{"nvdractl: inspect an nvdra node and drive its kubelet plugins like the kubelet does"};
  app.require_subcommand(1);
  int verbosity = 0;
  app.add_option("-v", verbosity, "log verbosity");
  int exit_code = 0;
  nvdra::ctl::AddLedgerCommands(app, exit_code);
  nvdra::ctl::AddKubeletCommands(app, exit_code);
  nvdra::ctl::AddCycleCommand(app, exit_code);
  app.parse_complete_callback([&] { nvdra::InitLogging(verbosity); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
