// Cost of one claim's begin+complete+unprepare cycle while N other claims are
// held, for the ledger and for a baseline that, like the Go driver's
// checkpoint, rewrites one whole JSON file (tmp + fsync + rename) per
// transition. Results and the command are in docs/benchmarks.md.
//
// The directory comes from LEDGER_BENCH_DIR (default: $TMPDIR or /tmp), so the
// same binary measures a real disk or tmpfs.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "ledger/claim_ledger.h"
#include "ledger/crc32c.h"
#include "ledger/log_format.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

std::string BenchDir() {
  const char* d = getenv("LEDGER_BENCH_DIR");
  if (d == nullptr || *d == '\0') d = getenv("TMPDIR");
  std::string tmpl = std::string(d && *d ? d : "/tmp") + "/nvdra-ledger-bench-XXXXXX";
  return mkdtemp(tmpl.data()) ? tmpl : std::string();
}

std::vector<AllocatedDevice> Alloc(const std::string& dev) {
  return {{"gpu", "gpu.nvidia.com", "node-a", dev, false, "", {}}};
}

std::vector<PreparedDevice> Prep(const std::string& uid, const std::string& dev) {
  return {{{"gpu"}, "node-a", dev, {"k8s.gpu.nvidia.com/claim=" + uid + "-" + dev}, ""}};
}

std::string Uid(const char* prefix, int64_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%08lld-0000-4000-8000-000000000000", prefix, static_cast<long long>(i));
  return buf;
}

ClaimEntry HeldEntry(int64_t i) {
  ClaimEntry e;
  e.uid = Uid("held", i);
  e.ns = "default";
  e.name = "claim-" + std::to_string(i);
  e.state = ClaimState::kPrepareCompleted;
  std::string dev = "gpu-" + std::to_string(i);
  e.allocation = Alloc(dev);
  e.held = {dev};
  e.prepared = Prep(e.uid, dev);
  e.undo = {{"devices", {dev}}};
  e.boot_id = "boot";
  return e;
}

// A compacted ledger holding `n` completed claims, written directly (opening
// 10,000 claims through the API would cost 20,000 fsyncs before measuring).
void SeedLedger(const std::string& dir, int64_t n) {
  std::string data = EncodeFileHeader();
  data += EncodeRecord(static_cast<uint8_t>(RecordType::kMeta), R"({"generation":1})");
  for (int64_t i = 0; i < n; ++i) {
    data += EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), EntryToJson(HeldEntry(i)).dump());
  }
  (void)WriteFileAtomically(JoinPath(dir, kLogFileName), data);
}

void BM_LedgerCycle(benchmark::State& state) {
  std::string dir = BenchDir();
  SeedLedger(dir, state.range(0));
  LedgerOptions o;
  o.dir = dir;
  o.boot_id = "boot";
  auto l = std::move(ClaimLedger::Open(o)).value();
  int64_t i = 0;
  uint64_t size_before = std::filesystem::file_size(JoinPath(dir, kLogFileName));
  for (auto _ : state) {
    std::string uid = Uid("cycle", i++);
    BeginPrepareRequest r{uid, "default", "c", Alloc("spare-gpu"), std::nullopt, nullptr, {}, {}};
    if (!l->BeginPrepare(r).ok() || !l->CompletePrepare(uid, Prep(uid, "spare-gpu"), nullptr).ok() ||
        !l->BeginUnprepare(uid).ok() || !l->FinishUnprepare(uid).ok()) {
      state.SkipWithError("ledger transition failed");
      break;
    }
  }
  state.counters["held"] = static_cast<double>(state.range(0));
  state.counters["file_bytes_growth_per_cycle"] =
      (static_cast<double>(std::filesystem::file_size(JoinPath(dir, kLogFileName))) -
       static_cast<double>(size_before)) /
      static_cast<double>(std::max<int64_t>(i, 1));
  l.reset();
  std::filesystem::remove_all(dir);
}

// The Go driver's shape (upstream reference, "Checkpoint format" and
// "Prepare / Unprepare flows"): one JSON document with every claim and a
// checksum over its re-serialisation. Every read parses the file and verifies
// the checksum by marshalling again; every write marshals the whole document
// and goes through tmp + fsync + rename (no directory fsync, as upstream).
class JsonCheckpoint {
 public:
  explicit JsonCheckpoint(std::string dir)
      : path_(JoinPath(dir, "checkpoint.json")), tmp_(JoinPath(dir, ".checkpoint.tmp")) {}

  nlohmann::json Read() {
    auto text = ReadFileToString(path_);
    nlohmann::json doc = nlohmann::json::parse(text.ok() ? *text : "{}", nullptr, false);
    uint32_t want = doc.value("checksum", 0u);
    doc["checksum"] = 0;
    if (Crc32c(doc.dump()) != want) std::abort();  // never happens here; keeps the work honest
    return doc;
  }

  void Write(nlohmann::json doc) {
    doc["checksum"] = 0;
    doc["checksum"] = Crc32c(doc.dump());
    std::string data = doc.dump();
    int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()) || ::fsync(fd) != 0) {
      std::abort();
    }
    ::close(fd);
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) std::abort();
  }

 private:
  std::string path_, tmp_;
};

void BM_JsonCheckpointCycle(benchmark::State& state) {
  std::string dir = BenchDir();
  JsonCheckpoint cp(dir);
  nlohmann::json doc = {{"checksum", 0}, {"v2", {{"preparedClaims", nlohmann::json::object()}}}};
  for (int64_t i = 0; i < state.range(0); ++i) {
    ClaimEntry e = HeldEntry(i);
    doc["v2"]["preparedClaims"][e.uid] = EntryToJson(e);
  }
  cp.Write(doc);
  int64_t i = 0;
  for (auto _ : state) {
    std::string uid = Uid("cycle", i++);
    ClaimEntry e = HeldEntry(1'000'000 + i);
    e.uid = uid;
    e.state = ClaimState::kPrepareStarted;
    // Prepare: read #1 (idempotency and overlap checks), read #2 + write #1
    // (PrepareStarted), read #3 + write #2 (PrepareCompleted).
    nlohmann::json d = cp.Read();
    benchmark::DoNotOptimize(d["v2"]["preparedClaims"].contains(uid));
    d = cp.Read();
    d["v2"]["preparedClaims"][uid] = EntryToJson(e);
    cp.Write(d);
    d = cp.Read();
    d["v2"]["preparedClaims"][uid]["state"] = "PrepareCompleted";
    cp.Write(d);
    // Unprepare: read (find the claim), read + write (delete it).
    d = cp.Read();
    benchmark::DoNotOptimize(d["v2"]["preparedClaims"].contains(uid));
    d = cp.Read();
    d["v2"]["preparedClaims"].erase(uid);
    cp.Write(d);
  }
  state.counters["held"] = static_cast<double>(state.range(0));
  std::filesystem::remove_all(dir);
}

BENCHMARK(BM_LedgerCycle)->Arg(1)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_JsonCheckpointCycle)
    ->Arg(1)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace nvdra::ledger

BENCHMARK_MAIN();
