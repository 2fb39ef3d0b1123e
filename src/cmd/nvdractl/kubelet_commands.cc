// nvdractl register | prepare | unprepare | watch-health: the kubelet's side
// of the DRA plugin protocol, for operators and tests. Output is JSON on
// stdout (documented in each command's --help and in
// docs/kubelet-surface.md); the exit code is 0 for success, 1 when the
// plugin answered but something in the answer failed (a claim error, a
// missing claim, an invalid registration), and 2 when the call itself
// failed (connection, timeout, top-level gRPC error) or the input is bad.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cmd/nvdractl/commands.h"
#include "kubelet/plugin_client.h"

namespace nvdra::ctl {

std::optional<std::vector<kubelet::ClaimRef>> ParseClaimRefs(const std::vector<std::string>& in) {
  std::vector<kubelet::ClaimRef> out;
  for (const auto& s : in) {
    // "namespace/name/uid"; the UID is everything after the second '/', so
    // malformed UIDs can be sent on purpose.
    auto a = s.find('/');
    auto b = a == std::string::npos ? a : s.find('/', a + 1);
    if (b == std::string::npos) {
      std::cerr << "claim \"" << s << "\" is not namespace/name/uid" << std::endl;
      return std::nullopt;
    }
    out.push_back({s.substr(0, a), s.substr(b + 1), s.substr(a + 1, b - a - 1)});
  }
  return out;
}

std::string UnimplementedHint(const std::string& message, const std::string& socket, Surface surface,
                              const std::string& api) {
  if (message.find("UNIMPLEMENTED") == std::string::npos) return "";
  const bool registration_socket = socket.ends_with("-reg.sock");
  const std::string dra_socket =
      "the DRA socket <kubelet plugins dir>/<driver>/dra.sock (e.g. /var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock)";
  switch (surface) {
    case Surface::kRegistration:
      return socket +
             " does not serve pluginregistration.Registration: register speaks to the registration "
             "socket <registrar dir>/<driver>-reg.sock (e.g. "
             "/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock), "
             "not to " +
             dra_socket;
    case Surface::kDra:
      if (registration_socket) {
        return socket + " is a registration socket; prepare, unprepare and cycle speak to " + dra_socket;
      }
      return "the plugin does not serve DRA API " + api + " on " + socket + "; try --api " +
             (api == "v1" ? "v1beta1" : "v1");
    case Surface::kHealth:
      if (registration_socket) return socket + " is a registration socket; watch-health speaks to " + dra_socket;
      return "the plugin does not stream device health (" + api +
             "): it does only when started with --health-streaming (NVDRA_HEALTH_STREAMING=true)";
  }
  return "";
}

namespace {

using kubelet::ClaimRef;
using kubelet::DraApi;
using kubelet::HealthApi;
using kubelet::PluginClient;
using nlohmann::json;

constexpr int kOk = 0;
constexpr int kClaimFailed = 1;
constexpr int kCallFailed = 2;

const char* kExitCodes = "\nExit status: 0 success; 1 the plugin answered but a claim failed, is missing "
                         "from the answer, or the answer is invalid; 2 the call failed (no connection, "
                         "timeout, gRPC error) or the arguments are bad.";

void Print(const json& j) { std::cout << j.dump(2) << std::endl; }

int CallFailed(const std::string& socket, const Status& s, Surface surface, const std::string& api) {
  std::cerr << s.message() << std::endl;
  json out{{"socket", socket}, {"rpc_error", s.message()}};
  if (std::string hint = UnimplementedHint(s.message(), socket, surface, api); !hint.empty()) {
    std::cerr << "hint: " << hint << std::endl;
    out["hint"] = hint;
  }
  Print(out);
  return kCallFailed;
}

struct ClaimArgs {
  std::string socket;
  std::string api = "v1";
  double timeout_s = 45;
  std::vector<std::string> claims;
};

void AddClaimOptions(CLI::App* cmd, ClaimArgs& a) {
  cmd->add_option("--socket", a.socket, "the plugin's DRA socket (dra.sock)")->required();
  cmd->add_option("--api", a.api, "DRA API version the kubelet speaks")->check(CLI::IsMember({"v1", "v1beta1"}));
  cmd->add_option("--timeout", a.timeout_s, "seconds for the call (the kubelet uses 45)");
  cmd->add_option("claims", a.claims, "claims as namespace/name/uid")->required();
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

json ClaimJson(const ClaimRef& c) { return {{"namespace", c.ns}, {"name", c.name}, {"uid", c.uid}}; }

// Entries for the response's UIDs that no requested claim has.
json Unexpected(const std::vector<ClaimRef>& claims, const std::vector<std::string>& uids) {
  json extra = json::array();
  for (const auto& uid : uids) {
    bool asked = std::any_of(claims.begin(), claims.end(), [&](const ClaimRef& c) { return c.uid == uid; });
    if (!asked) extra.push_back(uid);
  }
  return extra;
}

json DevicesJson(const std::vector<kubelet::PreparedDevice>& devices) {
  json out = json::array();
  for (const auto& d : devices) {
    json dj{{"request_names", d.requests},
            {"pool_name", d.pool},
            {"device_name", d.device},
            {"cdi_device_ids", d.cdi_device_ids}};
    if (!d.share_id.empty()) dj["share_id"] = d.share_id;
    out.push_back(std::move(dj));
  }
  return out;
}

// The report both commands print: one entry per requested UID (a claim
// missing from the answer is a failure), then UIDs nobody asked for.
// `error_of` and `fill` read the plugin's answer for one UID.
template <typename Answer, typename Fill>
int Report(const ClaimArgs& a, const std::vector<ClaimRef>& claims, const std::map<std::string, Answer>& answer,
           const std::function<const std::string&(const Answer&)>& error_of, const Fill& fill) {
  int rc = kOk;
  json out{{"api", a.api}, {"claims", json::array()}};
  std::vector<std::string> uids;
  for (const auto& [uid, unused] : answer) uids.push_back(uid);
  std::set<std::string> seen;
  for (const auto& c : claims) {
    if (!seen.insert(c.uid).second) continue;  // one entry per UID, like the response
    json j = ClaimJson(c);
    auto it = answer.find(c.uid);
    if (it == answer.end()) {
      j["missing"] = true;
      j["error"] = "claim missing from the response";
      rc = kClaimFailed;
    } else {
      const std::string& err = error_of(it->second);
      j["error"] = err;
      if (!err.empty()) {
        rc = kClaimFailed;
        std::cerr << fmt::format("claim {}: {}", c.ToString(), err) << std::endl;
      }
      fill(j, it->second);
    }
    out["claims"].push_back(std::move(j));
  }
  out["unexpected_uids"] = Unexpected(claims, uids);
  if (!out["unexpected_uids"].empty()) rc = kClaimFailed;
  Print(out);
  return rc;
}

int RunPrepare(const ClaimArgs& a) {
  auto claims = ParseClaimRefs(a.claims);
  if (!claims) return kCallFailed;
  DraApi api = a.api == "v1" ? DraApi::kV1 : DraApi::kV1beta1;
  auto r = PluginClient(a.socket).Prepare(api, *claims, Millis(a.timeout_s));
  if (!r.ok()) return CallFailed(a.socket, r.status(), Surface::kDra, a.api);
  return Report<kubelet::PrepareResult>(
      a, *claims, *r, [](const kubelet::PrepareResult& p) -> const std::string& { return p.error; },
      [](json& j, const kubelet::PrepareResult& p) { j["devices"] = DevicesJson(p.devices); });
}

int RunUnprepare(const ClaimArgs& a) {
  auto claims = ParseClaimRefs(a.claims);
  if (!claims) return kCallFailed;
  DraApi api = a.api == "v1" ? DraApi::kV1 : DraApi::kV1beta1;
  auto r = PluginClient(a.socket).Unprepare(api, *claims, Millis(a.timeout_s));
  if (!r.ok()) return CallFailed(a.socket, r.status(), Surface::kDra, a.api);
  return Report<std::string>(
      a, *claims, *r, [](const std::string& e) -> const std::string& { return e; }, [](json&, const std::string&) {});
}

struct RegisterArgs {
  std::string socket;
  std::string driver;
  std::string reject;
  double timeout_s = 1;
};

int RunRegister(const RegisterArgs& a) {
  PluginClient client(a.socket);
  auto info = client.GetInfo(Millis(a.timeout_s));
  if (!info.ok()) return CallFailed(a.socket, info.status(), Surface::kRegistration, "");
  auto problems = kubelet::ValidatePluginInfo(*info, a.driver);
  json out{{"socket", a.socket},
           {"info",
            {{"type", info->type},
             {"name", info->name},
             {"endpoint", info->endpoint},
             {"supported_versions", info->supported_versions}}},
           {"problems", problems}};
  bool reject = !a.reject.empty() || !problems.empty();
  std::string reason = a.reject;
  for (const auto& p : problems) reason += (reason.empty() ? "" : "; ") + p;
  Status s = client.NotifyRegistrationStatus(!reject, reject ? reason : "", Millis(a.timeout_s));
  out["registered"] = !reject && s.ok();
  out["notify_error"] = s.ok() ? "" : s.message();
  int rc;
  if (!problems.empty()) {
    for (const auto& p : problems) std::cerr << "invalid registration: " << p << std::endl;
    rc = kClaimFailed;
  } else if (!a.reject.empty()) {
    // The plugin must answer a rejection with an error.
    rc = s.ok() ? kClaimFailed : kOk;
  } else {
    rc = s.ok() ? kOk : kCallFailed;
  }
  Print(out);
  return rc;
}

void AddRegisterCommand(CLI::App& app, int& exit_code) {
  auto reg_args = std::make_shared<RegisterArgs>();
  auto* reg = app.add_subcommand(
      "register", std::string("Register a plugin like the kubelet's plugin watcher: GetInfo (1 s timeout by "
                              "default, as the kubelet), validate the answer, NotifyRegistrationStatus.\n"
                              "Output: {\"socket\", \"info\": {\"type\", \"name\", \"endpoint\", "
                              "\"supported_versions\"}, \"problems\": [..], \"registered\": bool, "
                              "\"notify_error\": \"..\"}; on a failed call {\"socket\", \"rpc_error\", \"hint\" (when "
                              "the socket does not serve the call)}.\n"
                              "With --reject the plugin is told registration failed; success then means "
                              "the plugin answered with an error, as it must.") +
                      kExitCodes);
  reg->add_option("--socket", reg_args->socket, "the plugin's registration socket (<driver>-reg.sock)")->required();
  reg->add_option("--driver", reg_args->driver, "expected driver name (optional)");
  reg->add_option("--reject", reg_args->reject, "send plugin_registered=false with this error");
  reg->add_option("--timeout", reg_args->timeout_s, "seconds for each call");
  reg->callback([reg_args, &exit_code] { exit_code = RunRegister(*reg_args); });
}

const char* kClaimsOutput = " Claims are namespace/name/uid; each appears once in the output, in argument order.\n";

void AddPrepareCommand(CLI::App& app, int& exit_code) {
  auto prep_args = std::make_shared<ClaimArgs>();
  auto* prep = app.add_subcommand(
      "prepare", std::string("NodePrepareResources like the kubelet.") + kClaimsOutput +
                     "Output: {\"api\", \"claims\": [{\"namespace\", \"name\", \"uid\", \"error\", "
                     "\"devices\": [{\"request_names\", \"pool_name\", \"device_name\", \"cdi_device_ids\", "
                     "\"share_id\" (v1, when set)}], \"missing\": true (only when absent)}], "
                     "\"unexpected_uids\": [..]}; on a failed call {\"socket\", \"rpc_error\", \"hint\" (when the "
                     "socket does not serve the call)}." +
                     kExitCodes);
  AddClaimOptions(prep, *prep_args);
  prep->callback([prep_args, &exit_code] { exit_code = RunPrepare(*prep_args); });
}

void AddUnprepareCommand(CLI::App& app, int& exit_code) {
  auto unprep_args = std::make_shared<ClaimArgs>();
  auto* unprep = app.add_subcommand(
      "unprepare", std::string("NodeUnprepareResources like the kubelet.") + kClaimsOutput +
                       "Output: {\"api\", \"claims\": [{\"namespace\", \"name\", \"uid\", \"error\", "
                       "\"missing\": true (only when absent)}], \"unexpected_uids\": [..]}; on a failed call "
                       "{\"socket\", \"rpc_error\"}." +
                       kExitCodes);
  AddClaimOptions(unprep, *unprep_args);
  unprep->callback([unprep_args, &exit_code] { exit_code = RunUnprepare(*unprep_args); });
}

struct WatchArgs {
  std::string socket;
  std::string api = "v1";
  int count = 0;
  double timeout_s = 10;
};

int RunWatchHealth(const WatchArgs& a) {
  int received = 0;
  Status s = PluginClient(a.socket).WatchHealth(
      a.api == "v1" ? HealthApi::kV1 : HealthApi::kV1alpha1, Millis(a.timeout_s),
      [&](const std::vector<kubelet::DeviceHealth>& devices) {
        json list = json::array();
        for (const auto& d : devices) {
          list.push_back({{"pool_name", d.pool},
                          {"device_name", d.device},
                          {"health", kubelet::DeviceHealthStatusName(d.health)},
                          {"last_updated_time", d.last_updated_unix},
                          {"health_check_timeout_seconds", d.health_check_timeout_seconds},
                          {"message", d.message}});
        }
        std::cout << json{{"devices", list}}.dump() << std::endl;
        ++received;
        return a.count <= 0 || received < a.count;
      });
  if (!s.ok()) {
    std::cerr << s.message() << std::endl;
    if (std::string hint = UnimplementedHint(s.message(), a.socket, Surface::kHealth, a.api); !hint.empty()) {
      std::cerr << "hint: " << hint << std::endl;
    }
    return kCallFailed;
  }
  return (a.count > 0 && received < a.count) ? kClaimFailed : kOk;
}

void AddWatchHealthCommand(CLI::App& app, int& exit_code) {
  auto watch_args = std::make_shared<WatchArgs>();
  auto* watch = app.add_subcommand(
      "watch-health", "Watch DRAResourceHealth/NodeWatchResources like the kubelet. Prints one JSON line per "
                      "message: {\"devices\": [{\"pool_name\", \"device_name\", \"health\" "
                      "(HEALTHY|UNHEALTHY|UNKNOWN), \"last_updated_time\", \"health_check_timeout_seconds\", "
                      "\"message\"}]}.\nExit status: 0 when --count messages arrived (or, without --count, the "
                      "stream ended or --timeout passed); 1 when fewer than --count arrived; 2 when the stream "
                      "failed (no connection, health streaming not served).");
  watch->add_option("--socket", watch_args->socket, "the plugin's DRA socket")->required();
  watch->add_option("--api", watch_args->api, "health API version")->check(CLI::IsMember({"v1", "v1alpha1"}));
  watch->add_option("--count", watch_args->count, "stop after this many messages (0: no limit)");
  watch->add_option("--timeout", watch_args->timeout_s, "stop after this many seconds");
  watch->callback([watch_args, &exit_code] { exit_code = RunWatchHealth(*watch_args); });
}

}  // namespace

void AddKubeletCommands(CLI::App& app, int& exit_code) {
  AddRegisterCommand(app, exit_code);
  AddPrepareCommand(app, exit_code);
  AddUnprepareCommand(app, exit_code);
  AddWatchHealthCommand(app, exit_code);
}

}  // namespace nvdra::ctl
