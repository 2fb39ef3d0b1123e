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

// `nvdractl ledger show|verify|rebuild|export-upstream <dir>`: look inside a
// node's claim ledger, rebuild lost entries, hand claims back to the Go driver.
void AddLedgerCommands(CLI::App& app, int& exit_code);

// `nvdractl register|prepare|unprepare|watch-health`: speak to a plugin as the kubelet does.
void AddKubeletCommands(CLI::App& app, int& exit_code);

// `nvdractl cycle`: prepare/unprepare latency over the real socket.
void AddCycleCommand(CLI::App& app, int& exit_code);

}  // namespace nvdra::ctl
