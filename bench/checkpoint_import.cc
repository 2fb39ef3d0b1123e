// Times the import of a Go driver checkpoint.json of N claims spread over G
// GPUs (the first start of nvdra on a node the Go driver ran), and reports
// the peak memory of the process. Results: docs/benchmarks.md.
//
//   checkpoint_import DIR CLAIMS GPUS
//
// Writes DIR/checkpoint.json, opens a ledger in DIR (which imports it), and
// prints one JSON line: {"claims", "gpus", "bytes", "import_ms", "max_rss_kb",
// "imported", "errors"}.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ledger/claim_ledger.h"
#include "ledger/legacy_checkpoint.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

std::string Uid(int i) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "5c1a0000-0000-4000-8000-%012d", i);
  return buf;
}

std::string Claim(int i, int gpus) {
  const std::string uid = Uid(i), dev = "gpu-" + std::to_string(i % gpus);
  return "\"" + uid +
         R"(":{"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":")" +
         dev +
         R"("}]}}},"preparedDevices":[{"devices":[{"gpu":{"device":{"requests":["gpu"],"poolName":"node-a","deviceName":")" +
         dev + R"(","cdiDeviceIDs":["k8s.gpu.nvidia.com/claim=)" + uid + "-" + dev + R"("]}}}]}],"name":"claim-)" +
         std::to_string(i) + R"(","namespace":"default"})";
}

std::string Checkpoint(int claims, int gpus) {
  std::string body;
  for (int i = 0; i < claims; ++i) body += (i ? "," : "") + Claim(i, gpus);
  std::string rest = ",\"preparedClaims\":{" + body + "},\"nodeBootID\":\"boot-1\"";
  uint32_t c2 = GoChecksum("{\"checksum\":0" + rest + "}");
  uint32_t c1 = GoChecksum("{\"checksum\":0,\"v1\":{}}");
  return "{\"checksum\":" + std::to_string(c1) + ",\"v1\":{},\"v2\":{\"checksum\":" + std::to_string(c2) + rest + "}}";
}

int Main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: checkpoint_import DIR CLAIMS GPUS\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  const std::string dir = argv[1];
  const int claims = std::atoi(argv[2]), gpus = std::max(1, std::atoi(argv[3]));
  std::string text = Checkpoint(claims, gpus);
  if (!MakeDirectories(dir).ok() || !WriteFileAtomically(JoinPath(dir, kLegacyCheckpointFileName), text).ok()) {
    std::fprintf(stderr, "cannot write the checkpoint in %s\n", dir.c_str());
    return 2;
  }
  const size_t bytes = text.size();
  text.clear();
  text.shrink_to_fit();
  LedgerOptions o;
  o.dir = dir;
  o.boot_id = "boot-1";
  auto start = std::chrono::steady_clock::now();
  auto l = ClaimLedger::Open(o);
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!l.ok()) {
    std::fprintf(stderr, "%s\n", l.status().ToString().c_str());
    return 1;
  }
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  nlohmann::json out = {{"claims", claims},
                        {"gpus", gpus},
                        {"bytes", bytes},
                        {"import_ms", static_cast<int64_t>(ms)},
                        {"max_rss_kb", ru.ru_maxrss},
                        {"imported", (*l)->report().imported_legacy_claims},
                        {"errors", (*l)->report().errors}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace nvdra::ledger

int main(int argc, char** argv) { return nvdra::ledger::Main(argc, argv); }
