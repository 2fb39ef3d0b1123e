// Fills a plugin's claim ledger with held claims and tombstones for
// bench/node_bench.py, through the ledger's own transitions (a real ledger,
// as a plugin writes it), in seconds rather than the hours that thousands of
// prepare/unprepare cycles with an fdatasync each take on a slow disk: the
// records are appended without a sync, and one compaction at the end writes
// the whole ledger durably (temp file, fsync, rename, directory fsync).
//
//   ledger_fill DIR BOOT_ID_PATH PREFIX HELD TOMBSTONES [DRIVER] [POOL]
//
// Held claims are PrepareCompleted on devices "<PREFIX>-dev-<i>" (no device
// of the node, so they never conflict with the benchmark's claims). Prints
// one JSON line per held claim ({"uid", "name", "device"}) so the caller can
// give each a ResourceClaim in the API server.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "ledger/claim_ledger.h"

namespace nvdra::ledger {
namespace {

// The real file system, with appends left unsynced.
class NoSyncEnv final : public ForwardingLedgerEnv {
 public:
  Result<std::unique_ptr<AppendFile>> OpenAppend(const std::string& path) override {
    auto f = base().OpenAppend(path);
    if (!f.ok()) return f.status();
    return std::unique_ptr<AppendFile>(new File(std::move(f).value()));
  }

 private:
  class File final : public ForwardingAppendFile {
   public:
    using ForwardingAppendFile::ForwardingAppendFile;
    Status Sync() override { return Status::Ok(); }
  };
};

// A claim UID as the API server makes them (letters, digits, dashes).
std::string Uid(const std::string& prefix, const char* kind, long i) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s-%s-%08ld-4000-8000-000000000000", prefix.c_str(), kind, i);
  return buf;
}

int Run(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: ledger_fill DIR BOOT_ID_PATH PREFIX HELD TOMBSTONES [DRIVER] [POOL]\n";
    return 2;
  }
  // stdout carries the held claims; the ledger's own lines go to stderr.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("ledger_fill"));
  spdlog::set_level(spdlog::level::warn);
  std::string driver = argc > 6 ? argv[6] : "gpu.nvidia.com";
  std::string pool = argc > 7 ? argv[7] : "node";
  std::string prefix = argv[3];
  long held = std::atol(argv[4]), tombstones = std::atol(argv[5]);
  NoSyncEnv env;
  LedgerOptions o;
  o.dir = argv[1];
  o.boot_id_path = argv[2];
  o.env = &env;
  auto opened = ClaimLedger::Open(o);
  if (!opened.ok()) {
    std::cerr << opened.status().ToString() << "\n";
    return 1;
  }
  ClaimLedger& l = **opened;
  auto one = [&](const std::string& uid, const std::string& name, const std::string& device, bool release) -> Status {
    BeginPrepareRequest r;
    r.uid = uid;
    r.ns = "default";
    r.name = name;
    r.allocation = {{"gpu", driver, pool, device, false, "", {}}};
    r.undo = {{"devices", {device}}};
    NVDRA_ASSIGN_OR_RETURN(BeginResult b, l.BeginPrepare(r));
    PreparedDevice p{{"gpu"}, pool, device, {}, ""};
    NVDRA_RETURN_IF_ERROR(l.CompletePrepare(uid, {p}, r.undo, b.entry.attempt));
    if (!release) return Status::Ok();
    NVDRA_RETURN_IF_ERROR(l.BeginUnprepare(uid).status());
    return l.FinishUnprepare(uid);
  };
  for (long i = 0; i < held; ++i) {
    std::string uid = Uid(prefix, "h", i), name = prefix + "-held-" + std::to_string(i);
    std::string device = prefix + "-dev-" + std::to_string(i);
    if (Status s = one(uid, name, device, false); !s.ok()) {
      std::cerr << s.ToString() << "\n";
      return 1;
    }
    std::cout << nlohmann::json{{"uid", uid}, {"name", name}, {"device", device}}.dump() << "\n";
  }
  for (long i = 0; i < tombstones; ++i) {
    std::string uid = Uid(prefix, "t", i);
    if (Status s = one(uid, prefix + "-gone-" + std::to_string(i), prefix + "-old-" + std::to_string(i % 64), true);
        !s.ok()) {
      std::cerr << s.ToString() << "\n";
      return 1;
    }
  }
  // One synced rewrite makes everything above durable.
  if (Status s = l.CollectGarbage(/*force_compaction=*/true); !s.ok()) {
    std::cerr << s.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace nvdra::ledger

int main(int argc, char** argv) { return nvdra::ledger::Run(argc, argv); }
