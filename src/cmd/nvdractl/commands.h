// nvdractl: the operator's tool and the kubelet stand-in. Each group of
// subcommands lives in its own file and registers itself on the app; a
// subcommand's callback sets the process exit code through `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "kubelet/claim_engine.h"

namespace nvdra::ctl {

// Claims given as "namespace/name/uid"; nullopt (after saying why on stderr)
// when one is malformed.
std::optional<std::vector<kubelet::ClaimRef>> ParseClaimRefs(const std::vector<std::string>& claims);

// What a plugin serves on a socket, to explain an UNIMPLEMENTED answer.
enum class Surface { kRegistration, kDra, kHealth };

// A hint for a failed call to `socket`, or "" when the failure is not an
// UNIMPLEMENTED answer: the wrong socket (registration vs DRA), another DRA
// API version, or device health streaming that is off.
std::string UnimplementedHint(const std::string& message, const std::string& socket, Surface surface,
                              const std::string& api);

// `nvdractl ledger show|verify|rebuild|export-upstream <dir>`: look inside a
// node's claim ledger, rebuild lost entries, hand claims back to the Go driver.
void AddLedgerCommands(CLI::App& app, int& exit_code);

// `nvdractl register|prepare|unprepare|watch-health`: speak to a plugin as the kubelet does.
void AddKubeletCommands(CLI::App& app, int& exit_code);

// `nvdractl cycle` and `nvdractl wait-info`: prepare/unprepare latency and
// claims per second over one held connection, and time to GetInfo.
void AddCycleCommand(CLI::App& app, int& exit_code);

// `nvdractl probe`: the kubelet's gRPC liveness probe against a plugin's
// --healthcheck-port.
void AddProbeCommand(CLI::App& app, int& exit_code);

// `nvdractl node remove-clique-labels`: the nvidia.com/gpu.clique labels
// nvdra wrote, removed from every Node (the chart's pre-delete hook).
void AddNodeCommands(CLI::App& app, int& exit_code);

}  // namespace nvdra::ctl
