// libFuzzer target for the ledger decoder: any bytes (a torn write, a flipped
// bit, a file from another program or version) must decode without crashing,
// reading out of bounds or inventing records, and whatever verifies must be
// exactly what is on disk. Also built as a plain replay test (see
// ledger_decoder_replay_test.cc) so every CI run exercises it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ledger/ledger_state.h"
#include "ledger/log_format.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nvdra::ledger;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DecodedLog log = DecodeLog(bytes);
  if (log.header != HeaderStatus::kOk) {
    // Recovery decodes past a damaged header too.
    if (size < kFileHeaderSize) return 0;
    log.body = DecodeRecords(bytes.substr(kFileHeaderSize), kFileHeaderSize);
  }
  uint64_t pos = kFileHeaderSize, covered = 0;
  for (const auto& r : log.body.records) {
    Check(r.offset >= pos && r.offset + r.size <= size);
    // A verified record is byte-for-byte what is on disk.
    Check(EncodeRecord(r.type, r.payload) == bytes.substr(r.offset, r.size));
    pos = r.offset + r.size;
    covered += r.size;
  }
  for (const auto& d : log.body.damage) covered += d.length;
  Check(covered == size - kFileHeaderSize);  // every byte is a record or damage
  Check(log.body.valid_end <= size);
  LedgerState state;
  for (const auto& r : log.body.records) (void)state.Apply(r);
  for (const auto& [uid, e] : state.entries()) Check(!uid.empty() && uid == e.uid);
  return 0;
}
