// LegacyCheckpointMigration: the upgrade from the Go driver. When a driver's
// directory has no ledger yet, its checkpoint.json is imported (under the Go
// driver's pu.lock, so a Go plugin still running cannot interleave) and,
// once the ledger holding its claims is durable, retired (renamed aside).
// The file format itself is legacy_checkpoint.h's; what the claims hold is
// the kind's KindCodec's.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ledger/kind_codec.h"
#include "ledger/ledger_env.h"
#include "ledger/ledger_state.h"
#include "ledger/open_report.h"
#include "util/clock.h"
#include "util/status.h"

namespace nvdra::ledger {

class LegacyCheckpointMigration {
 public:
  struct Options {
    LedgerEnv* env = nullptr;
    std::string dir;                   // the driver's plugin data directory
    const KindCodec* codec = nullptr;  // nullptr: keep every allocation result
    std::string boot_id;               // the current boot
    const Clock* clock = nullptr;
    std::chrono::nanoseconds lock_timeout{0};  // waiting for pu.lock
  };
  explicit LegacyCheckpointMigration(Options options);

  // No ledger exists: imports checkpoint.json, if there is one, into `state`
  // (fresh), holding pu.lock until ReleaseLock. A checkpoint that cannot be
  // read is reported in `report` and marks claims as possibly missing, and
  // is left in place; Unavailable only while pu.lock is held by another.
  Status Import(LedgerState& state, OpenReport& report);
  // Once the ledger holding the import is durable: renames the imported
  // checkpoint.json aside (a rollback can still read it; a lost ledger
  // cannot bring its claims back).
  void Retire(OpenReport& report);
  // An existing ledger was opened: a checkpoint.json next to it that it
  // imported (the plugin stopped before retiring it) is retired now; any
  // other one is ignored with a warning (the ledger is the truth).
  void CheckNextToLedger(const LedgerState::Meta& meta, OpenReport& report);
  void ReleaseLock() { pu_lock_.reset(); }

 private:
  std::string CheckpointPath() const;

  Options opts_;
  std::string to_retire_;  // a checkpoint.json imported into a ledger not yet durable
  std::unique_ptr<FileLock> pu_lock_;
};

}  // namespace nvdra::ledger
