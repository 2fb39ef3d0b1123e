// `nvdractl ledger show|verify <dir>`: how an operator looks inside a node's
// claim ledger. Both only read: they never repair, rename or create files, so
// they are safe next to running plugins.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cmd/nvdractl/commands.h"
#include "ledger/claim_ledger.h"
#include "ledger/ledger_inspector.h"
#include "util/boot_id.h"

namespace nvdra::ctl {
namespace {

using ledger::ClaimEntry;
using ledger::LedgerInspection;

std::string Join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string Time(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Devices(const ClaimEntry& e) {
  std::vector<std::string> out;
  if (!e.prepared.empty()) {
    for (const auto& d : e.prepared) out.push_back(d.pool + "/" + d.device);
  } else {
    for (const auto& d : e.allocation) out.push_back(d.pool + "/" + d.device + (d.admin_access ? "(admin)" : ""));
  }
  return Join(out);
}

std::string CdiIds(const ClaimEntry& e) {
  std::vector<std::string> out;
  for (const auto& d : e.prepared) {
    for (const auto& id : d.cdi_device_ids) out.push_back(id);
  }
  return Join(out);
}

void PrintProblems(const LedgerInspection& in, std::FILE* f) {
  if (in.header != ledger::HeaderStatus::kOk) {
    std::fprintf(f, "DAMAGE: file header: %s\n", ledger::HeaderStatusName(in.header));
  }
  for (const auto& d : in.damage) {
    std::fprintf(f, "DAMAGE: %llu bytes at offset %llu: %s\n",
                 static_cast<unsigned long long>(d.length), static_cast<unsigned long long>(d.offset),
                 d.reason.c_str());
  }
  if (in.double_held > 0) {
    std::fprintf(f, "INCONSISTENT: %zu resources recorded for two live claims\n", in.double_held);
    for (const auto& d : in.double_holds) std::fprintf(f, "INCONSISTENT: %s\n", d.c_str());
  }
  if (in.claims_may_be_missing) {
    std::fprintf(f, "RECOVERING: an unreadable ledger or checkpoint was set aside; claims may be missing "
                    "until they are rebuilt (nvdractl ledger rebuild)\n");
  }
  for (const auto& n : in.notes) std::fprintf(f, "note: %s\n", n.c_str());
  for (const auto& s : in.side_files) {
    std::fprintf(f, "note: side file %s (quarantined or set-aside data from an earlier recovery)\n",
                 s.c_str());
  }
}

nlohmann::json ToJson(const LedgerInspection& in) {
  nlohmann::json claims = nlohmann::json::array();
  for (const auto& e : in.entries) {
    nlohmann::json j = ledger::EntryToJson(e);
    j["fromEarlierBoot"] = e.from_earlier_boot;
    claims.push_back(std::move(j));
  }
  nlohmann::json damage = nlohmann::json::array();
  for (const auto& d : in.damage) {
    damage.push_back({{"offset", d.offset}, {"length", d.length}, {"reason", d.reason}});
  }
  return {{"path", in.path},
          {"exists", in.exists},
          {"header", ledger::HeaderStatusName(in.header)},
          {"formatVersion", in.version},
          {"fileSize", in.file_size},
          {"generation", in.generation},
          {"records", in.records},
          {"damaged", in.damaged()},
          {"damage", damage},
          {"doubleHeld", in.double_held},
          {"doubleHolds", in.double_holds},
          {"claimsMayBeMissing", in.claims_may_be_missing},
          {"notes", in.notes},
          {"sideFiles", in.side_files},
          {"claims", claims}};
}

int Show(const std::string& dir, bool json, const std::string& boot_id_file) {
  auto boot = ReadBootId(boot_id_file);
  auto in = ledger::InspectLedger(dir, boot.ok() ? *boot : "");
  if (!in.ok()) {
    std::fprintf(stderr, "nvdractl: %s\n", in.status().message().c_str());
    return 2;
  }
  if (json) {
    std::cout << ToJson(*in).dump(2) << "\n";
    return 0;
  }
  if (!in->exists) {
    std::printf("no ledger in %s\n", dir.c_str());
    return 0;
  }
  std::printf("%-38s %-32s %-17s %-7s %-24s %-20s %s\n", "UID", "CLAIM", "STATE", "BOOT", "UPDATED",
              "DEVICES", "CDI DEVICE IDS");
  for (const auto& e : in->entries) {
    std::printf("%-38s %-32s %-17s %-7s %-24s %-20s %s\n", e.uid.c_str(), (e.ns + "/" + e.name).c_str(),
                ledger::ClaimStateName(e.state), e.from_earlier_boot ? "earlier" : "current",
                Time(e.updated).c_str(), Devices(e).c_str(), CdiIds(e).c_str());
  }
  std::printf("%zu claims, %zu records, %llu bytes\n", in->entries.size(), in->records,
              static_cast<unsigned long long>(in->file_size));
  PrintProblems(*in, stdout);
  return 0;
}

int Verify(const std::string& dir) {
  auto in = ledger::InspectLedger(dir);
  if (!in.ok()) {
    std::fprintf(stderr, "nvdractl: %s\n", in.status().message().c_str());
    return 2;
  }
  if (!in->exists) {
    std::fprintf(stderr, "nvdractl: no ledger (%s) in %s\n", ledger::kLogFileName, dir.c_str());
    return 2;
  }
  PrintProblems(*in, stdout);
  bool bad = in->damaged() || in->inconsistent();
  std::printf("%s: format v%u, %zu records, %zu claims, %llu bytes: %s\n", in->path.c_str(),
              in->version, in->records, in->entries.size(),
              static_cast<unsigned long long>(in->file_size),
              bad ? "DAMAGED (the plugin quarantines the damage and keeps what verifies when it "
                    "next opens the ledger)"
                  : "OK");
  return bad ? 1 : 0;
}

}  // namespace

void AddLedgerCommands(CLI::App& app, int& exit_code) {
  struct Flags {
    std::string dir, boot_id_file = kDefaultBootIdPath;
    bool json = false;
  };
  // Owned by the callbacks, which live as long as the app.
  auto flags = std::make_shared<Flags>();
  auto* group = app.add_subcommand("ledger", "inspect a driver's claim ledger (read-only)");
  group->require_subcommand(1);

  auto* show = group->add_subcommand("show", "print claims, states and devices");
  show->add_option("dir", flags->dir, "the driver's plugin data directory")->required();
  show->add_flag("--json", flags->json, "print JSON instead of a table");
  show->add_option("--boot-id-file", flags->boot_id_file, "where the current boot id is read from");
  show->callback([flags, &exit_code] { exit_code = Show(flags->dir, flags->json, flags->boot_id_file); });

  auto* verify = group->add_subcommand(
      "verify", "check every record's checksum; exit 1 on damage, 2 if there is no ledger");
  verify->add_option("dir", flags->dir, "the driver's plugin data directory")->required();
  verify->callback([flags, &exit_code] { exit_code = Verify(flags->dir); });
}

}  // namespace nvdra::ctl
