// nvdractl cycle: prepares and unprepares claims one after the other, as the
// kubelet does for short-lived pods, and reports the latency of each call
// over the real socket. For measuring a node, not for production traffic.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/nvdractl/commands.h"
#include "kubelet/plugin_client.h"

namespace nvdra::ctl {
namespace {

struct CycleArgs {
  std::string socket;
  std::vector<std::string> claims;
};

nlohmann::json Summary(std::vector<double> ms) {
  if (ms.empty()) return nullptr;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))]; };
  return {{"count", ms.size()}, {"p50", at(0.50)}, {"p90", at(0.90)}, {"p99", at(0.99)}, {"max", ms.back()}};
}

}  // namespace

void AddCycleCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CycleArgs>();
  auto* cmd = app.add_subcommand(
      "cycle",
      "Prepare then unprepare each claim in turn (v1, one claim per call) and print the latency "
      "of the calls as JSON: {\"prepare_ms\": {count, p50, p90, p99, max}, \"unprepare_ms\": ..., "
      "\"errors\": [..]}. Exit status 1 if any call failed.");
  cmd->add_option("--socket", args->socket, "the plugin's DRA socket")->required();
  cmd->add_option("claims", args->claims, "claims as namespace/name/uid")->required();
  cmd->callback([args, &exit_code] {
    kubelet::PluginClient client(args->socket);
    std::vector<double> prep, unprep;
    nlohmann::json errors = nlohmann::json::array();
    auto claims = ParseClaimRefs(args->claims);
    if (!claims) {
      exit_code = 2;
      return;
    }
    for (const auto& c : *claims) {
      const std::string s = c.ns + "/" + c.name + "/" + c.uid;
      auto t0 = std::chrono::steady_clock::now();
      auto p = client.Prepare(kubelet::DraApi::kV1, {c}, std::chrono::seconds(45));
      auto t1 = std::chrono::steady_clock::now();
      auto u = client.Unprepare(kubelet::DraApi::kV1, {c}, std::chrono::seconds(45));
      auto t2 = std::chrono::steady_clock::now();
      prep.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      unprep.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      if (!p.ok()) {
        errors.push_back(s + ": prepare: " + p.status().message());
        std::string hint = UnimplementedHint(p.status().message(), args->socket, Surface::kDra, "v1");
        if (!hint.empty()) std::cerr << "hint: " << hint << std::endl;
      }
      if (p.ok() && p->count(c.uid) && !p->at(c.uid).error.empty()) errors.push_back(s + ": " + p->at(c.uid).error);
      if (!u.ok()) errors.push_back(s + ": unprepare: " + u.status().message());
      else if (u->count(c.uid) && !u->at(c.uid).empty()) errors.push_back(s + ": " + u->at(c.uid));
    }
    std::cout << nlohmann::json{{"prepare_ms", Summary(prep)}, {"unprepare_ms", Summary(unprep)}, {"errors", errors}}
                     .dump(2)
              << std::endl;
    exit_code = errors.empty() ? 0 : 1;
  });
}

}  // namespace nvdra::ctl
