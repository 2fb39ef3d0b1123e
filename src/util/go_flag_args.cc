#include "util/go_flag_args.h"

namespace nvdra {

std::vector<std::string> GoFlagArgs(const std::vector<std::string>& args,
                                    const std::function<FlagArity(std::string_view name)>& arity) {
  std::vector<std::string> out;
  out.reserve(args.size());
  bool value_next = false;
  bool rest_positional = false;
  for (const std::string& a : args) {
    if (rest_positional || value_next) {
      value_next = false;
      out.push_back(a);
      continue;
    }
    if (a == "--") {
      rest_positional = true;
      out.push_back(a);
      continue;
    }
    const bool one_dash = a.size() > 1 && a[0] == '-' && a[1] != '-';
    const bool two_dashes = a.size() > 2 && a[0] == '-' && a[1] == '-';
    if (!one_dash && !two_dashes) {
      out.push_back(a);
      continue;
    }
    std::string_view body = std::string_view(a).substr(two_dashes ? 2 : 1);
    const size_t eq = body.find('=');
    const FlagArity kind = arity(body.substr(0, eq));
    if (kind == FlagArity::kUnknown) {
      // A short option cluster ("-v3"), or a mistake the parser reports.
      out.push_back(a);
      continue;
    }
    value_next = kind == FlagArity::kValue && eq == std::string_view::npos;
    out.push_back(one_dash ? "-" + a : a);
  }
  return out;
}

}  // namespace nvdra
