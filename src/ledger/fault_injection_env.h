// Test-only LedgerEnv over the real file system that remembers how much of
// each file was synced, so a test can simulate power loss (drop everything
// written since the last sync) or make syncs fail (LevelDB's
// fault_injection_test approach).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "ledger/ledger_env.h"
#include "util/mutex.h"

namespace nvdra::ledger {

class FaultInjectionEnv final : public ForwardingLedgerEnv {
 public:
  // Truncates every file written through this env to its last synced size.
  void DropUnsyncedData() EXCLUDES(mu_) {
    MutexLock l(mu_);
    for (const auto& [path, synced] : synced_) {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) > synced) {
        if (::truncate(path.c_str(), static_cast<off_t>(synced)) != 0) continue;
      }
    }
  }
  void set_fail_syncs(bool fail) { fail_syncs_ = fail; }
  // New files (compaction, side files) get half their bytes, then the write
  // fails as on a full disk; appends to the open log still succeed.
  void set_fail_new_files(bool fail) { fail_new_files_ = fail; }
  uint64_t bytes_appended() const { return bytes_appended_; }
  // Append calls so far (a ledger record is one, or two around its torn-write
  // point while that is armed).
  uint64_t appends() const EXCLUDES(mu_) {
    MutexLock l(mu_);
    return appends_;
  }
  // Every Sync waits until Append has been called `n` times in all: lets a
  // test have many records appended while one sync is in flight.
  void HoldSyncsUntilAppends(uint64_t n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    hold_syncs_until_ = n;
  }
  // Returns once Append has been called `n` times in all.
  void WaitForAppends(uint64_t n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    appended_cv_.Wait(mu_, [&]() REQUIRES(mu_) { return appends_ >= n; });
  }
  int syncs() const EXCLUDES(mu_) {
    MutexLock l(mu_);
    return syncs_;
  }

  Result<std::unique_ptr<AppendFile>> OpenAppend(const std::string& path) override {
    auto f = base().OpenAppend(path);
    if (!f.ok()) return f.status();
    {
      MutexLock l(mu_);
      if (!synced_.count(path)) {
        auto id = base().Stat(path);
        synced_[path] = id.ok() ? id->size : 0;
      }
    }
    return std::unique_ptr<AppendFile>(new File(this, path, std::move(f).value()));
  }
  Status WriteNewFile(const std::string& path, std::string_view data) override {
    if (fail_syncs_) return Unavailable("injected sync failure");
    if (fail_new_files_) {
      // What a full disk leaves: the file exists with part of its bytes.
      (void)base().WriteNewFile(path, data.substr(0, data.size() / 2));
      return Unavailable("cannot write " + path + ": No space left on device (injected)");
    }
    NVDRA_RETURN_IF_ERROR(base().WriteNewFile(path, data));
    MutexLock l(mu_);
    synced_[path] = data.size();
    ++syncs_;
    return Status::Ok();
  }
  Status Rename(const std::string& from, const std::string& to) override {
    NVDRA_RETURN_IF_ERROR(base().Rename(from, to));
    MutexLock l(mu_);
    if (auto it = synced_.find(from); it != synced_.end()) {
      synced_[to] = it->second;
      synced_.erase(it);
    }
    return Status::Ok();
  }

 private:
  class File final : public ForwardingAppendFile {
   public:
    File(FaultInjectionEnv* env, std::string path, std::unique_ptr<AppendFile> f)
        : ForwardingAppendFile(std::move(f)), env_(env), path_(std::move(path)) {}
    Status Append(std::string_view data) override {
      env_->bytes_appended_ += data.size();
      Status s = base().Append(data);
      MutexLock l(env_->mu_);
      ++env_->appends_;
      env_->appended_cv_.NotifyAll();
      return s;
    }
    Status Sync() override {
      {
        MutexLock l(env_->mu_);
        env_->appended_cv_.Wait(env_->mu_,
                                [this]() REQUIRES(env_->mu_) { return env_->appends_ >= env_->hold_syncs_until_; });
      }
      if (env_->fail_syncs_) return Unavailable("injected sync failure");
      NVDRA_RETURN_IF_ERROR(base().Sync());
      auto id = env_->base().Stat(path_);
      MutexLock l(env_->mu_);
      ++env_->syncs_;
      if (id.ok()) env_->synced_[path_] = id->size;
      return Status::Ok();
    }
    Status Truncate(uint64_t size) override {
      NVDRA_RETURN_IF_ERROR(base().Truncate(size));
      MutexLock l(env_->mu_);
      if (env_->synced_[path_] > size) env_->synced_[path_] = size;
      return Status::Ok();
    }

   private:
    FaultInjectionEnv* env_;
    std::string path_;
  };

  mutable Mutex mu_;
  std::map<std::string, uint64_t> synced_ GUARDED_BY(mu_);
  // Set between operations by the test's own thread.
  bool fail_syncs_ = false;
  bool fail_new_files_ = false;
  uint64_t bytes_appended_ = 0;
  int syncs_ GUARDED_BY(mu_) = 0;
  uint64_t appends_ GUARDED_BY(mu_) = 0;
  uint64_t hold_syncs_until_ GUARDED_BY(mu_) = 0;
  CondVar appended_cv_;
};

}  // namespace nvdra::ledger
