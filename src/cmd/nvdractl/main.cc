#include <iostream>

#include "cmd/nvdractl/commands.h"
#include "util/build_info.h"
#include "util/log.h"

namespace {

// The top level's exit-status footer says what is common; a subcommand's own
// help says its exit status, and must not show the generic one beside it.
void ClearFooters(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    sub->footer("");
    ClearFooters(*sub);
  }
}

// "" or what is wrong with the words naming the (sub)command: CLI11 would
// only say "A subcommand is required" for `nvdractl bogus`.
std::string UnknownCommand(CLI::App& app, int argc, char** argv) {
  CLI::App* cur = &app;
  std::string path = "nvdractl";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-v") {
      ++i;  // its value
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    CLI::App* sub = nullptr;
    for (CLI::App* s : cur->get_subcommands({})) {
      if (s->check_name(arg)) sub = s;
    }
    if (sub != nullptr) {
      cur = sub;
      path += " " + arg;
      continue;
    }
    if (cur->get_require_subcommand_min() == 0) return "";  // a positional argument of a command
    std::string known;
    for (const CLI::App* s : cur->get_subcommands({})) known += (known.empty() ? "" : ", ") + s->get_name();
    return "unknown command \"" + arg + "\" for " + path + " (commands: " + known + ")";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nvdractl: inspect an nvdra node and drive its kubelet plugins like the kubelet does"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("nvdra ") + nvdra::BuildVersion() +
                                        "\ncommit: " + nvdra::BuildCommit() + "\ndate: " + nvdra::BuildDate());
  int verbosity = 0;
  app.add_option("-v", verbosity, "log verbosity");
  int exit_code = 0;
  nvdra::ctl::AddLedgerCommands(app, exit_code);
  nvdra::ctl::AddKubeletCommands(app, exit_code);
  nvdra::ctl::AddCycleCommand(app, exit_code);
  nvdra::ctl::AddProbeCommand(app, exit_code);
  nvdra::ctl::AddNodeCommands(app, exit_code);
  ClearFooters(app);
  app.footer("Exit status: 0 success; 1 the plugin answered but something in the answer failed; "
             "2 bad arguments, or the call itself failed. Each subcommand's --help says more.");
  app.parse_complete_callback([&] { nvdra::InitLogging(verbosity); });
  if (std::string unknown = UnknownCommand(app, argc, argv); !unknown.empty()) {
    std::cerr << "nvdractl: " << unknown << "\nRun with --help for more information.\n";
    return 2;
  }
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
