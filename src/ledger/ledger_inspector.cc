#include "ledger/ledger_inspector.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "ledger/claim_ledger.h"
#include "ledger/ledger_state.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

// A shared lock, when the lock file exists, so a concurrent append is not
// mistaken for a torn tail. Best effort: an operator tool must not hang
// behind a stuck plugin, so it gives up after a few seconds and reads anyway.
class SharedLock {
 public:
  explicit SharedLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd_ < 0) return;
    auto wait = std::chrono::milliseconds(1);
    for (int i = 0; i < 12; ++i) {
      if (::flock(fd_, LOCK_SH | LOCK_NB) == 0) return;
      std::this_thread::sleep_for(wait);
      wait *= 2;
    }
  }
  ~SharedLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

}  // namespace

Result<LedgerInspection> InspectLedger(const std::string& dir, const std::string& current_boot_id) {
  LedgerInspection out;
  out.path = JoinPath(dir, kLogFileName);
  if (!PathExists(dir)) return NotFound("directory " + dir + " does not exist");
  auto names = ListDirectory(dir);
  if (names.ok()) {
    for (const auto& n : *names) {
      if (n.starts_with(std::string(kLogFileName) + ".")) out.side_files.push_back(n);
    }
  }
  if (!PathExists(out.path)) return out;
  out.exists = true;
  SharedLock lock(JoinPath(dir, kLockFileName));
  NVDRA_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(out.path));
  out.file_size = bytes.size();
  DecodedLog log = DecodeLog(bytes);
  out.header = log.header;
  out.version = log.version;
  if (log.header == HeaderStatus::kBadChecksum) {
    log.body = DecodeRecords(std::string_view(bytes).substr(kFileHeaderSize), kFileHeaderSize);
  }
  out.damage = log.body.damage;
  out.records = log.body.records.size();
  LedgerState state;
  for (const auto& r : log.body.records) {
    if (auto why = state.Apply(r)) out.notes.push_back(*why);
  }
  out.generation = state.generation();
  out.double_held = state.double_held();
  out.double_holds = state.double_holds();
  out.claims_may_be_missing = state.meta().lost_claims_since_ms != 0;
  for (const auto& [uid, e] : state.entries()) {
    ClaimEntry c = e;
    c.from_earlier_boot = c.state != ClaimState::kTombstone && !current_boot_id.empty() && c.boot_id != current_boot_id;
    out.entries.push_back(std::move(c));
  }
  return out;
}

}  // namespace nvdra::ledger
