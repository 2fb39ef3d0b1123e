// ClaimLedger's reads: entries, holders of a resource, the counts the
// gauges show, and the open report; none writes a record.
#include <string>
#include <vector>

#include "ledger/claim_ledger.h"
#include "ledger/claim_ledger_locked.h"

namespace nvdra::ledger {

ClaimEntry ClaimLedger::Decorate(ClaimEntry e) const {
  e.from_earlier_boot = FromEarlierBoot(e, boot_id_);
  return e;
}

const ClaimEntry* ClaimLedger::FindLive(const std::string& uid) const {
  const ClaimEntry* e = state_.Find(uid);
  if (e != nullptr && e->state == ClaimState::kTombstone && opts_.clock->Now() - e->updated >= opts_.tombstone_ttl) {
    return nullptr;
  }
  return e;
}

Result<bool> ClaimLedger::ClaimsMayBeMissing() {
  return Locked([&]() REQUIRES(mu_) -> Result<bool> {
    RefreshReportLocked();
    return ledger::ClaimsMayBeMissing(state_.meta());
  });
}

Result<std::vector<ClaimEntry>> ClaimLedger::List() {
  return Locked([&]() REQUIRES(mu_) -> Result<std::vector<ClaimEntry>> {
    std::vector<ClaimEntry> out;
    for (const auto& [uid, e] : state_.entries()) {
      if (FindLive(uid) != nullptr) out.push_back(Decorate(e));
    }
    return out;
  });
}

Result<std::vector<ClaimEntry>> ClaimLedger::ListHeld() {
  return Locked([&]() REQUIRES(mu_) -> Result<std::vector<ClaimEntry>> {
    std::vector<ClaimEntry> out;
    for (const auto& [uid, e] : state_.entries()) {
      if (e.state != ClaimState::kTombstone) out.push_back(Decorate(e));
    }
    return out;
  });
}

Result<std::optional<ClaimEntry>> ClaimLedger::Get(const std::string& uid) {
  return Locked([&]() REQUIRES(mu_) -> Result<std::optional<ClaimEntry>> {
    const ClaimEntry* e = FindLive(uid);
    if (e == nullptr) return std::optional<ClaimEntry>();
    return std::optional(Decorate(*e));
  });
}

Result<std::optional<ClaimState>> ClaimLedger::PeekState(const std::string& uid) {
  {
    MutexLock l(mu_);
    if (file_ != nullptr) {
      auto id = env_->Stat(log_path_);
      if (id.ok() && id->SameFile(file_id_) && id->size == read_offset_) {
        const ClaimEntry* e = FindLive(uid);
        if (e == nullptr) return std::optional<ClaimState>();
        return std::optional<ClaimState>(e->state);
      }
    }
  }
  NVDRA_ASSIGN_OR_RETURN(std::optional<ClaimEntry> e, Get(uid));
  if (!e) return std::optional<ClaimState>();
  return std::optional<ClaimState>(e->state);
}

Result<std::optional<ClaimEntry>> ClaimLedger::HolderOf(const std::string& resource) {
  return Locked([&]() REQUIRES(mu_) -> Result<std::optional<ClaimEntry>> {
    const ClaimEntry* e = state_.HolderOf(resource);
    if (e == nullptr) return std::optional<ClaimEntry>();
    return std::optional(Decorate(*e));
  });
}

Result<std::vector<ClaimEntry>> ClaimLedger::HoldersOf(const std::string& resource, const std::string& except) {
  return Locked([&]() REQUIRES(mu_) -> Result<std::vector<ClaimEntry>> {
    std::vector<ClaimEntry> out;
    for (const ClaimEntry* e : state_.HoldersOf(resource, except)) out.push_back(Decorate(*e));
    return out;
  });
}

LedgerState ClaimLedger::NewStateLocked() const {
  LedgerState s;
  s.set_device_classifier(classify_);
  return s;
}

void ClaimLedger::SetDeviceClassifier(LedgerState::DeviceClassifier classify) {
  MutexLock l(mu_);
  classify_ = std::move(classify);
  state_.set_device_classifier(classify_);
}

LedgerCounts ClaimLedger::Counts() const {
  MutexLock l(mu_);
  LedgerCounts c;
  for (size_t i = 0; i < kClaimStateCount; ++i) c.claims[i] = state_.count(static_cast<ClaimState>(i));
  c.prepared_devices = state_.prepared_devices();
  c.bytes = read_offset_;
  return c;
}

OpenReport ClaimLedger::report() const {
  MutexLock l(mu_);
  return report_;
}

}  // namespace nvdra::ledger
