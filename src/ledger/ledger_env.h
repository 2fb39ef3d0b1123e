// The ledger's file-system seam (LevelDB's Env): every file operation the
// ledger performs goes through a LedgerEnv, so tests can drop data that was
// never synced, fail a sync, or count bytes, and production uses POSIX.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::ledger {

// An open file the ledger appends to. Appends land at the end of the file.
class AppendFile {
 public:
  virtual ~AppendFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // Up to `n` bytes at `offset` (fewer at the end of the file).
  virtual Result<std::string> ReadAt(uint64_t offset, size_t n) = 0;
  // Makes every appended byte durable (fdatasync).
  virtual Status Sync() = 0;
  // Cuts the file back, e.g. after a failed append left a partial record.
  virtual Status Truncate(uint64_t size) = 0;
};

// An AppendFile that passes every call to another; wrappers (fault
// injection, probes) override only what they change.
class ForwardingAppendFile : public AppendFile {
 public:
  explicit ForwardingAppendFile(std::unique_ptr<AppendFile> f) : f_(std::move(f)) {}
  Status Append(std::string_view data) override { return f_->Append(data); }
  Result<std::string> ReadAt(uint64_t offset, size_t n) override { return f_->ReadAt(offset, n); }
  Status Sync() override { return f_->Sync(); }
  Status Truncate(uint64_t size) override { return f_->Truncate(size); }

 protected:
  AppendFile& base() { return *f_; }

 private:
  std::unique_ptr<AppendFile> f_;
};

// Held while the caller owns the cross-process lock; released on destruction
// (and by the kernel when the process dies).
class FileLock {
 public:
  virtual ~FileLock() = default;
};

struct FileIdentity {
  bool exists = false;
  uint64_t device = 0, inode = 0, size = 0;
  bool SameFile(const FileIdentity& o) const { return exists && o.exists && device == o.device && inode == o.inode; }
};

// Whether a write failed because the volume (or the user's quota) is full.
bool IsOutOfSpace(const Status& s);

class LedgerEnv {
 public:
  virtual ~LedgerEnv() = default;

  // The environment backed by the real file system.
  static LedgerEnv& Posix();

  virtual Result<FileIdentity> Stat(const std::string& path) = 0;
  // Reads from `offset` to the end of the file.
  virtual Result<std::string> ReadFrom(const std::string& path, uint64_t offset) = 0;
  virtual Result<std::unique_ptr<AppendFile>> OpenAppend(const std::string& path) = 0;
  // Creates `path`, which must not exist yet (O_EXCL|O_NOFOLLOW: nothing
  // planted there is written through), writes `data` and syncs it. On
  // failure the partial file is removed.
  virtual Status WriteNewFile(const std::string& path, std::string_view data) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  virtual Status SyncDir(const std::string& dir) = 0;
  virtual Status Remove(const std::string& path) = 0;
  virtual Status MakeDirs(const std::string& dir) = 0;
  // Exclusive lock on `path` (created if missing, never through a symbolic
  // link), waiting until `deadline`.
  virtual Result<std::unique_ptr<FileLock>> Lock(const std::string& path,
                                                 std::chrono::steady_clock::time_point deadline) = 0;
  // The size in bytes of the file system that holds `dir`; 0 when unknown.
  virtual uint64_t VolumeBytes(const std::string& dir) {
    (void)dir;
    return 0;
  }
};

// Passes every call to another environment (the real file system unless
// told otherwise); a test or tool environment derives from it and overrides
// only what it changes.
class ForwardingLedgerEnv : public LedgerEnv {
 public:
  explicit ForwardingLedgerEnv(LedgerEnv& base = LedgerEnv::Posix()) : base_(base) {}

  Result<FileIdentity> Stat(const std::string& path) override { return base_.Stat(path); }
  Result<std::string> ReadFrom(const std::string& path, uint64_t offset) override {
    return base_.ReadFrom(path, offset);
  }
  Result<std::unique_ptr<AppendFile>> OpenAppend(const std::string& path) override { return base_.OpenAppend(path); }
  Status WriteNewFile(const std::string& path, std::string_view data) override {
    return base_.WriteNewFile(path, data);
  }
  Status Rename(const std::string& from, const std::string& to) override { return base_.Rename(from, to); }
  Status SyncDir(const std::string& dir) override { return base_.SyncDir(dir); }
  Status Remove(const std::string& path) override { return base_.Remove(path); }
  Status MakeDirs(const std::string& dir) override { return base_.MakeDirs(dir); }
  Result<std::unique_ptr<FileLock>> Lock(const std::string& path,
                                         std::chrono::steady_clock::time_point deadline) override {
    return base_.Lock(path, deadline);
  }
  uint64_t VolumeBytes(const std::string& dir) override { return base_.VolumeBytes(dir); }

 protected:
  LedgerEnv& base() { return base_; }

 private:
  LedgerEnv& base_;
};

}  // namespace nvdra::ledger
