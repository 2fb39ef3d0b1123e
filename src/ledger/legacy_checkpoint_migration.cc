#include "ledger/legacy_checkpoint_migration.h"

#include <utility>

#include <fmt/format.h>

#include "ledger/claim_entry.h"
#include "ledger/legacy_checkpoint.h"
#include "ledger/log_format.h"
#include "ledger/lost_claim_recovery.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::ledger {
LegacyCheckpointMigration::LegacyCheckpointMigration(Options options) : opts_(std::move(options)) {}

std::string LegacyCheckpointMigration::CheckpointPath() const { return JoinPath(opts_.dir, kLegacyCheckpointFileName); }

Status LegacyCheckpointMigration::Import(LedgerState& state, OpenReport& report) {
  std::string path = CheckpointPath();
  NVDRA_ASSIGN_OR_RETURN(FileIdentity st, opts_.env->Stat(path));
  if (!st.exists) return Status::Ok();
  // The Go plugin rewrites checkpoint.json under pu.lock: holding it through
  // the import and the retiring keeps a Go plugin that is still running from
  // interleaving (it waits, then finds no checkpoint and starts empty).
  std::string pu = JoinPath(opts_.dir, kLegacyPrepareLockFileName);
  auto lock = opts_.env->Lock(pu,
                              std::chrono::steady_clock::now() +
                                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(opts_.lock_timeout));
  if (!lock.ok()) {
    return Unavailable("cannot import the Go driver's " + path + ": its prepare lock " + pu +
                       " is held (is the Go plugin still running? stop it first, see docs/migration.md): " +
                       lock.status().message());
  }
  pu_lock_ = std::move(lock).value();
  auto lost = [&](const std::string& why) {
    report.errors.push_back("cannot import the Go driver's " + path + ": " + why +
                            "; the file is left in place, and the plugin keeps every CDI spec until the "
                            "claims are rebuilt (nvdractl ledger rebuild, docs/migration.md)");
    MarkClaimsMissing(state.mutable_meta(), opts_.clock->Now(), kLegacyCheckpointFileName);
    return Status::Ok();
  };
  if (auto st = opts_.env->Stat(path); st.ok() && st->size > kMaxLegacyCheckpointBytes) {
    return lost(fmt::format("it is {} bytes long, over the {} MiB nvdra imports", st->size,
                            kMaxLegacyCheckpointBytes >> 20));
  }
  auto text = opts_.env->ReadFrom(path, 0);
  if (!text.ok()) return lost(text.status().message());
  auto imported = ParseLegacyCheckpoint(*text, opts_.codec, opts_.boot_id);
  if (!imported.ok()) return lost(imported.status().message());
  for (auto& e : imported->entries) {
    e.updated = opts_.clock->Now();
    if (!opts_.boot_id.empty() && e.boot_id != opts_.boot_id) ++report.earlier_boot_claims;
    std::string rec = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), EntryToJson(e).dump());
    state.Put(std::move(e), rec.size());
  }
  state.mutable_meta().imported_checkpoint = imported->checksums;
  report.imported_legacy_claims = imported->entries.size();
  report.claims = state.entries().size();
  for (const auto& w : imported->warnings) report.warnings.push_back(w);
  if (!imported->node_boot_id.empty() && !opts_.boot_id.empty() && imported->node_boot_id != opts_.boot_id) {
    // Upstream invalidates such a checkpoint; its claims are kept here, as
    // claims of that earlier boot: a Prepare redoes their node work, an
    // Unprepare still undoes what survives a reboot.
    report.warnings.push_back(
        fmt::format("checkpoint nodeBootID \"{}\" != current \"{}\": its claims belong to that earlier boot",
                    imported->node_boot_id, opts_.boot_id));
  }
  NVDRA_INFO("imported {} claims from the Go driver's {}", imported->entries.size(), path);
  to_retire_ = path;
  return Status::Ok();
}

void LegacyCheckpointMigration::Retire(OpenReport& report) {
  if (to_retire_.empty()) return;
  std::string path = std::exchange(to_retire_, std::string());
  // Renamed, not deleted: a rollback can still read it. The Go driver only
  // reads checkpoint.json, and the ledger never imports this name, so a lost
  // ledger.log cannot bring its claims back.
  std::string retired_name = fmt::format("{}.imported-{}", kLegacyCheckpointFileName, UnixMs(opts_.clock->Now()));
  std::string retired = JoinPath(opts_.dir, retired_name);
  Status s = opts_.env->Rename(path, retired);
  if (s.ok()) s = opts_.env->SyncDir(opts_.dir);
  if (!s.ok()) {
    report.warnings.push_back("cannot retire " + path + " after importing it: " + s.message() +
                              "; it is retired at the next start");
    return;
  }
  report.warnings.push_back(fmt::format("imported {} claims from the Go driver's {} (renamed to {})",
                                        report.imported_legacy_claims, path, retired_name));
}

void LegacyCheckpointMigration::CheckNextToLedger(const LedgerState::Meta& meta, OpenReport& report) {
  std::string path = CheckpointPath();
  auto st = opts_.env->Stat(path);
  if (!st.ok() || !st->exists) return;
  auto text = st->size > kMaxLegacyCheckpointBytes ? Result<std::string>(FailedPrecondition("too large"))
                                                   : opts_.env->ReadFrom(path, 0);
  auto parsed = text.ok() ? ParseLegacyCheckpoint(*text, opts_.codec, opts_.boot_id) : text.status();
  if (parsed.ok() && !meta.imported_checkpoint.empty() && parsed->checksums == meta.imported_checkpoint) {
    // Imported, but the plugin stopped before it could retire the file.
    to_retire_ = path;
    Retire(report);
    return;
  }
  report.warnings.push_back(
      path + " exists next to the ledger and was not imported: the ledger is the truth. After a rollback "
             "to the Go driver and an upgrade again, follow docs/migration.md");
}

}  // namespace nvdra::ledger
