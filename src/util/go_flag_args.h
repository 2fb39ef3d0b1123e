// Go's flag package, which the upstream driver's binaries parse their command
// lines with, takes a long flag after one dash as well as after two
// ("-node-name x", "-v=3", "-feature-gates=A=true"); CLI11 takes two only.
// GoFlagArgs rewrites the one-dash spellings of known long flags so that a
// command line written for upstream's binaries parses unchanged.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nvdra {

// What the parser knows of a long flag name (without dashes).
enum class FlagArity {
  kUnknown,  // not a flag: left as written (a short option cluster such as -v3)
  kSwitch,   // takes no separate value ("-name" or "-name=false")
  kValue,    // takes a value, attached ("-name=x") or as the next argument
};

// `args` without the program name. "-name[=value]" of a known long name
// becomes "--name[=value]"; the argument after a value-taking flag without
// "=" is its value and stays as written, and so does everything after "--".
std::vector<std::string> GoFlagArgs(const std::vector<std::string>& args,
                                    const std::function<FlagArity(std::string_view name)>& arity);

// Parses `argv` (program name first) with a CLI11 app after GoFlagArgs,
// throwing as the app's own parse does. A template, so that util/ needs no
// CLI11 of its own.
template <typename CliApp>
void ParseGoFlags(CliApp& app, int argc, const char* const* argv) {
  auto arity = [&app](std::string_view name) {
    if (name.empty()) return FlagArity::kUnknown;
    const auto* opt = app.get_option_no_throw("--" + std::string(name));
    if (opt == nullptr) return FlagArity::kUnknown;
    return opt->get_type_size() == 0 ? FlagArity::kSwitch : FlagArity::kValue;
  };
  if (argc > 0 && app.get_name().empty()) app.name(argv[0]);  // as CLI11's own parse names the program
  std::vector<std::string> args = GoFlagArgs(std::vector<std::string>(argv + std::min(argc, 1), argv + argc), arity);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
}

}  // namespace nvdra
