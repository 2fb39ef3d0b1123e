#include <iostream>

#include "cmd/nvdractl/commands.h"
#include "util/log.h"

int main(int argc, char** argv) {
  CLI::App app{"nvdractl: inspect an nvdra node and drive its kubelet plugins like the kubelet does"};
  app.require_subcommand(1);
  app.footer("Exit status: 0 success; 1 the plugin answered but something in the answer failed; "
             "2 bad arguments, or the call itself failed. Each subcommand's --help says more.");
  int verbosity = 0;
  app.add_option("-v", verbosity, "log verbosity");
  int exit_code = 0;
  nvdra::ctl::AddLedgerCommands(app, exit_code);
  nvdra::ctl::AddKubeletCommands(app, exit_code);
  nvdra::ctl::AddCycleCommand(app, exit_code);
  nvdra::ctl::AddProbeCommand(app, exit_code);
  app.parse_complete_callback([&] { nvdra::InitLogging(verbosity); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a "parse error" with exit code 0; every real one is a bad
    // argument, which the documented exit status says is 2.
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
