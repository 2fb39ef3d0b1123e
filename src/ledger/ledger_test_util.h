// Test helpers shared by the ledger tests: a scratch directory and requests
// built from short device lists.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ledger/claim_ledger.h"
#include "ledger/legacy_checkpoint.h"

namespace nvdra::ledger::testing {

class ScratchDir {
 public:
  // `base` empty: $TMPDIR, else /tmp.
  explicit ScratchDir(std::string base = "") {
    if (base.empty()) {
      const char* env = getenv("TMPDIR");
      base = env && *env ? env : "/tmp";
    }
    std::string tmpl = base + "/nvdra-ledger-XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::vector<AllocatedDevice> Alloc(const std::vector<std::string>& devices, bool admin = false) {
  std::vector<AllocatedDevice> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    out.push_back({"req" + std::to_string(i), "gpu.nvidia.com", "node-a", devices[i], admin, "", {}});
  }
  return out;
}

inline BeginPrepareRequest Request(const std::string& uid, const std::vector<std::string>& devices,
                                   bool admin = false) {
  BeginPrepareRequest r;
  r.uid = uid;
  r.ns = "default";
  r.name = "claim-" + uid;
  r.allocation = Alloc(devices, admin);
  r.undo = {{"devices", devices}};
  return r;
}

inline std::vector<PreparedDevice> Prepared(const std::string& uid, const std::vector<std::string>& devices) {
  std::vector<PreparedDevice> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    out.push_back({{"req" + std::to_string(i)},
                   "node-a",
                   devices[i],
                   {"k8s.gpu.nvidia.com/claim=" + uid + "-" + devices[i]},
                   ""});
  }
  return out;
}

// A checkpoint.json as the Go driver writes it: `claims` is the v2
// "preparedClaims" object's text (uid -> claim), checksums filled in.
inline std::string GoCheckpointFile(const std::string& claims, const std::string& boot_id) {
  std::string rest = ",\"preparedClaims\":" + claims + ",\"nodeBootID\":\"" + boot_id + "\"";
  uint32_t c2 = GoChecksum("{\"checksum\":0" + rest + "}");
  uint32_t c1 = GoChecksum("{\"checksum\":0,\"v1\":{}}");
  return "{\"checksum\":" + std::to_string(c1) + ",\"v1\":{},\"v2\":{\"checksum\":" + std::to_string(c2) + rest + "}}";
}

inline uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

}  // namespace nvdra::ledger::testing
