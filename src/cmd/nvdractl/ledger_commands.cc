// `nvdractl ledger show|verify|rebuild|export-upstream <dir>`: how an operator
// looks inside a node's claim ledger, rebuilds lost entries from the CDI specs
// on the node, and hands the claims back to the Go driver on a rollback.
// show and verify only read: they never repair, rename or create files, so
// they are safe next to running plugins. rebuild records entries through the
// ledger's own locking, also safe next to a running plugin.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cdi/cdi_spec_writer.h"
#include "cmd/nvdractl/commands.h"
#include "cmd/nvdractl/kind_codecs.h"
#include "ledger/claim_ledger.h"
#include "ledger/ledger_holder_lock.h"
#include "ledger/ledger_inspector.h"
#include "ledger/legacy_checkpoint.h"
#include "util/boot_id.h"
#include "util/file_util.h"
#include "util/uid.h"

namespace nvdra::ctl {
namespace {

using ledger::ClaimEntry;
using ledger::LedgerInspection;

std::string Join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
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
    std::fprintf(f, "DAMAGE: %llu bytes at offset %llu: %s\n", static_cast<unsigned long long>(d.length),
                 static_cast<unsigned long long>(d.offset), d.reason.c_str());
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
    std::fprintf(f, "note: side file %s (quarantined or set-aside data from an earlier recovery)\n", s.c_str());
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

// "45s", "12m", "3h", "2d": how long ago `t` was.
std::string Age(std::chrono::system_clock::time_point t, std::chrono::system_clock::time_point now) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(now - t).count();
  if (s < 0) return "0s";
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  if (s < 172800) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

// The pods (UIDs) the claim was reserved for at its last Prepare.
std::string Pods(const ClaimEntry& e) {
  if (e.consumers.empty()) return "-";
  return e.consumers.size() == 1 ? e.consumers[0] : e.consumers[0] + " +" + std::to_string(e.consumers.size() - 1);
}

int Show(const std::string& dir, bool json, bool all, const std::string& boot_id_file) {
  auto boot = ReadBootId(boot_id_file);
  auto in = ledger::InspectLedger(dir, boot.ok() ? *boot : "");
  if (!in.ok()) {
    std::fprintf(stderr, "nvdractl: %s\n", in.status().message().c_str());
    return 2;
  }
  if (json) {
    std::cout << ToJson(*in).dump(2) << "\n";
    return 0;  // "exists" says whether there is a ledger
  }
  if (!in->exists) {
    std::fprintf(stderr, "nvdractl: no ledger (%s) in %s\n", ledger::kLogFileName, dir.c_str());
    return 2;
  }
  const auto now = std::chrono::system_clock::now();
  std::printf("%-38s %-32s %-38s %-17s %-7s %-5s %-20s %s\n", "UID", "CLAIM", "POD", "STATE", "BOOT", "AGE", "DEVICES",
              "CDI DEVICE IDS");
  size_t live = 0, hidden = 0;
  for (const auto& e : in->entries) {
    bool holds = ledger::HoldsResources(e.state);
    live += holds ? 1 : 0;
    if (!holds && !all) {
      ++hidden;
      continue;
    }
    std::printf("%-38s %-32s %-38s %-17s %-7s %-5s %-20s %s\n", e.uid.c_str(), (e.ns + "/" + e.name).c_str(),
                Pods(e).c_str(), ledger::ClaimStateName(e.state), e.from_earlier_boot ? "earlier" : "current",
                Age(e.updated, now).c_str(), Devices(e).c_str(), CdiIds(e).c_str());
  }
  std::printf("%zu live claims", live);
  if (hidden > 0) std::printf(" (%zu tombstones not shown; --all lists them)", hidden);
  std::printf(", %zu records, %llu bytes\n", in->records, static_cast<unsigned long long>(in->file_size));
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
  std::printf("%s: format v%u, %zu records, %zu claims, %llu bytes: %s\n", in->path.c_str(), in->version, in->records,
              in->entries.size(), static_cast<unsigned long long>(in->file_size),
              bad ? "DAMAGED (the plugin quarantines the damage and keeps what verifies when it "
                    "next opens the ledger)"
                  : "OK");
  return bad ? 1 : 0;
}

int Rebuild(const std::string& dir, const std::string& cdi_root, const std::string& driver,
            const std::string& boot_id_file, bool keep_recovering) {
  ledger::LedgerOptions o;
  o.dir = dir;
  o.boot_id_path = boot_id_file;
  o.codec = CodecForDriver(driver);
  auto l = ledger::ClaimLedger::Open(o);
  if (!l.ok()) {
    std::fprintf(stderr, "nvdractl: %s\n", l.status().message().c_str());
    return 2;
  }
  cdi::CdiSpecWriter cdi(cdi_root, "k8s." + driver);
  auto uids = cdi.ListClaimSpecUids();
  if (!uids.ok()) {
    std::fprintf(stderr, "nvdractl: %s\n", uids.status().message().c_str());
    return 2;
  }
  int failed = 0, rebuilt = 0;
  for (const auto& uid : *uids) {
    auto spec = cdi.ReadClaimSpec(uid);
    if (!spec.ok()) {
      // The spec (ours, or the Go driver's .yaml) is unreadable or no spec.
      std::printf("skipped %s: %s\n", uid.c_str(), spec.status().message().c_str());
      continue;
    }
    ledger::RebuiltClaim c;
    c.uid = uid;
    c.ns = spec->ns;
    c.name = spec->name;
    c.source = "cdi spec";
    c.devices = spec->devices;
    for (const auto& d : c.devices) c.cdi_device_ids.push_back(cdi.DeviceId(uid, d));
    if (c.devices.empty()) {
      std::printf("skipped %s: its CDI spec names no device of the claim\n", uid.c_str());
      continue;
    }
    // A spec alone does not say whether a claim had every channel of a
    // kind (allocationMode All): what the devices hold without configs.
    c.held = ledger::HeldByDevices(o.codec, c.devices);
    auto before = (*l)->Get(uid);
    bool known = before.ok() && before->has_value() && ledger::HoldsResources((*before)->state);
    Status s = (*l)->RebuildEntry(c);
    if (!s.ok()) {
      std::printf("FAILED %s: %s\n", uid.c_str(), s.message().c_str());
      ++failed;
    } else if (known) {
      std::printf("kept %s: the ledger already has it\n", uid.c_str());
    } else {
      std::printf("rebuilt %s: %s\n", uid.c_str(), Join(c.devices).c_str());
      ++rebuilt;
    }
  }
  if (failed == 0 && !keep_recovering) {
    Status s = (*l)->FinishRecovery();
    if (!s.ok()) {
      std::fprintf(stderr, "nvdractl: %s\n", s.message().c_str());
      return 1;
    }
  }
  std::printf("%d entries rebuilt, %d failed%s\n", rebuilt, failed,
              failed == 0 && !keep_recovering ? "; recovery finished" : "");
  return failed == 0 ? 0 : 1;
}

// After a rollback the Go driver's checkpoint is the truth; a later upgrade
// imports it again instead of trusting this ledger.
int RetireLedger(const std::string& dir) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  std::string log = JoinPath(dir, ledger::kLogFileName);
  std::string aside = log + ".exported-" + std::to_string(ms);
  if (std::rename(log.c_str(), aside.c_str()) != 0) {
    std::fprintf(stderr, "nvdractl: cannot rename %s: %s\n", log.c_str(), ErrnoText(errno).c_str());
    return 1;
  }
  std::printf("renamed %s to %s\n", log.c_str(), aside.c_str());
  return 0;
}

// Each exported claim's CDI spec under the Go driver's name and format, so
// its Unprepare removes the spec after the rollback (it deletes only its own
// name). Returns how many specs could not be handed over.
int HandSpecsToUpstream(const std::vector<ClaimEntry>& entries, const std::string& cdi_root,
                        const std::string& driver) {
  cdi::CdiSpecWriter cdi(cdi_root, "k8s." + driver);
  int failed = 0, handed = 0;
  for (const auto& e : entries) {
    if (!ledger::HoldsResources(e.state)) continue;
    Status s = cdi.HandClaimSpecToUpstream(e.uid);
    if (s.ok()) {
      ++handed;
    } else if (s.code() != StatusCode::kNotFound) {
      std::fprintf(stderr, "nvdractl: claim %s: %s\n", e.uid.c_str(), s.message().c_str());
      ++failed;
    }
  }
  std::printf("%d CDI specs in %s under the Go driver's names (%s-claim_<uid>.yaml)\n", handed, cdi_root.c_str(),
              ("k8s." + driver).c_str());
  return failed;
}

int ExportUpstream(const std::string& dir, std::string output, const std::string& driver,
                   const std::string& boot_id_file, bool force, bool retire_ledger, const std::string& target,
                   const std::string& cdi_root) {
  auto release = ledger::ParseUpstreamRelease(target);
  if (!release) {
    std::fprintf(stderr, "nvdractl: unknown --target %s (one of %s)\n", target.c_str(),
                 ledger::UpstreamReleaseNames().c_str());
    return 2;
  }
  auto boot = ReadBootId(boot_id_file);
  if (!boot.ok()) {
    std::fprintf(stderr, "nvdractl: %s\n", boot.status().message().c_str());
    return 2;
  }
  // A running plugin would import the exported checkpoint again at its next
  // transition and start a new ledger: the rollback would be undone. Held
  // from the export through the rename, so no plugin opens the ledger between.
  std::unique_ptr<ledger::LedgerHolderLock> sole;
  if (retire_ledger && PathExists(JoinPath(dir, ledger::kLogFileName))) {
    auto held = ledger::LedgerHolderLock::TryExclusive(dir);
    if (!held.ok()) {
      std::fprintf(stderr,
                   "nvdractl: refusing to retire the ledger: %s (a running plugin would import the "
                   "exported checkpoint again); nothing was written\n",
                   held.status().message().c_str());
      return 1;
    }
    sole = std::move(held).value();
  }
  auto in = ledger::InspectLedger(dir, *boot);
  if (!in.ok() || !in->exists) {
    std::fprintf(stderr, "nvdractl: %s\n", in.ok() ? ("no ledger in " + dir).c_str() : in.status().message().c_str());
    return 2;
  }
  if (in->damaged() || in->inconsistent()) {
    std::fprintf(stderr,
                 "nvdractl: the ledger in %s is damaged or recovering (see `nvdractl ledger verify`); "
                 "exporting what verifies\n",
                 dir.c_str());
  }
  if (output.empty()) output = JoinPath(dir, ledger::kLegacyCheckpointFileName);
  if (PathExists(output) && !force) {
    std::fprintf(stderr, "nvdractl: %s exists; refusing to overwrite it without --force\n", output.c_str());
    return 1;
  }
  const ledger::KindCodec* codec = driver.empty() ? &CodecOfEntries(in->entries) : CodecForDriver(driver);
  std::string text = ledger::WriteLegacyCheckpoint(in->entries, *boot, codec, *release);
  Status s = WriteFileAtomically(output, text, 0600);
  if (!s.ok()) {
    std::fprintf(stderr, "nvdractl: %s\n", s.message().c_str());
    return 1;
  }
  size_t live = 0;
  for (const auto& e : in->entries) live += ledger::HoldsResources(e.state) ? 1 : 0;
  std::printf("wrote %s with %zu claims for boot %s, as the Go driver %s reads it\n", output.c_str(), live,
              boot->c_str(), ledger::UpstreamReleaseName(*release));
  // Specs are handed over only with the ledger retired: a plugin still using
  // the ledger keeps its own spec names.
  if (!retire_ledger) return 0;
  if (!cdi_root.empty() &&
      HandSpecsToUpstream(in->entries, cdi_root, codec != nullptr ? codec->driver_name() : driver) > 0)
    return 1;
  return RetireLedger(dir);
}

}  // namespace

void AddLedgerCommands(CLI::App& app, int& exit_code) {
  struct Flags {
    std::string dir, boot_id_file = kDefaultBootIdPath;
    bool json = false, all = false;
    std::string cdi_root = "/var/run/cdi", driver = DefaultCodec().driver_name(), export_driver, output;
    std::string target = ledger::UpstreamReleaseName(ledger::kLatestUpstreamRelease);
    bool keep_recovering = false, force = false, retire_ledger = false;
  };
  // Owned by the callbacks, which live as long as the app.
  auto flags = std::make_shared<Flags>();
  auto* group = app.add_subcommand("ledger", "inspect, rebuild or export a driver's claim ledger");
  group->require_subcommand(1);

  auto* show = group->add_subcommand(
      "show", "print the live claims (those holding devices) with their pods, states, age since their last "
              "change and devices; exit 2 if there is no ledger (--json: \"exists\": false, exit 0)");
  show->add_option("dir", flags->dir, "the driver's plugin data directory")->required();
  show->add_flag("--json", flags->json, "print JSON instead of a table (every entry, tombstones included)");
  show->add_flag("--all", flags->all, "list tombstones (claims unprepared a moment ago) too");
  show->add_option("--boot-id-file", flags->boot_id_file, "where the current boot id is read from");
  show->callback([flags, &exit_code] { exit_code = Show(flags->dir, flags->json, flags->all, flags->boot_id_file); });

  auto* verify = group->add_subcommand("verify",
                                       "check every record's checksum; exit 1 on damage, 2 if there is no ledger");
  verify->add_option("dir", flags->dir, "the driver's plugin data directory")->required();
  verify->callback([flags, &exit_code] { exit_code = Verify(flags->dir); });

  auto* rebuild = group->add_subcommand(
      "rebuild", "record the claims whose CDI specs are on the node but whose entries were lost, then end "
                 "the recovery (exit 1 when some could not be rebuilt)");
  rebuild->add_option("dir", flags->dir, "the driver's plugin data directory")->required();
  rebuild->add_option("--cdi-root", flags->cdi_root, "the CDI spec directory");
  rebuild->add_option("--driver", flags->driver, "the driver's name (" + KnownDrivers() + ")");
  rebuild->add_option("--boot-id-file", flags->boot_id_file, "where the current boot id is read from");
  rebuild->add_flag("--keep-recovering", flags->keep_recovering,
                    "do not end the recovery (the plugin keeps every CDI spec)");
  rebuild->callback([flags, &exit_code] {
    exit_code = Rebuild(flags->dir, flags->cdi_root, flags->driver, flags->boot_id_file, flags->keep_recovering);
  });

  auto* exp = group->add_subcommand(
      "export-upstream", "write the Go driver's checkpoint.json from the ledger, for a rollback (docs/migration.md)");
  exp->add_option("dir", flags->dir, "the driver's plugin data directory")->required();
  exp->add_option("--output", flags->output, "where to write (default: <dir>/checkpoint.json)");
  exp->add_option("--driver", flags->export_driver,
                  "the driver's name (" + KnownDrivers() + "; default: the driver of the ledger's claims)");
  exp->add_option("--boot-id-file", flags->boot_id_file, "where the current boot id is read from");
  exp->add_option("--target", flags->target,
                  "the Go driver release to write for (" + ledger::UpstreamReleaseNames() +
                      "; default: the latest release); each marshals the checkpoint differently and refuses "
                      "another's as corrupt");
  exp->add_option("--cdi-root", flags->cdi_root,
                  "with --retire-ledger: the CDI spec directory whose claim specs are renamed to the Go driver's "
                  "names (\"\": leave them)");
  exp->add_flag("--force", flags->force, "overwrite an existing checkpoint");
  exp->add_flag("--retire-ledger", flags->retire_ledger,
                "rename ledger.log aside, so a later upgrade imports the checkpoint again (refused while a "
                "plugin has the ledger open)");
  exp->callback([flags, &exit_code] {
    exit_code = ExportUpstream(flags->dir, flags->output, flags->export_driver, flags->boot_id_file, flags->force,
                               flags->retire_ledger, flags->target, flags->cdi_root);
  });
}

}  // namespace nvdra::ctl
