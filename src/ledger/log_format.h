// The ledger's on-disk framing (docs/ledger-format.md): a 16-byte file header,
// then records of  crc32c(4) | length(4) | type(1) | payload(length), all
// integers little-endian, the CRC covering length, type and payload exactly as
// stored. Decoding never throws and never trusts a length it has not checked,
// so any byte string (a torn write, a flipped bit, a file from the future)
// yields the records that verify plus a description of the damage.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nvdra::ledger {

inline constexpr std::string_view kFileMagic = "NVDRALDG";
inline constexpr size_t kFileHeaderSize = 16;
inline constexpr size_t kRecordHeaderSize = 9;
// Only this major format version is understood; a newer major is set aside.
inline constexpr uint32_t kFormatVersion = 1;
// A length beyond this is damage, not a record (a claim entry is a few KiB).
inline constexpr uint32_t kMaxRecordPayload = 16u << 20;

enum class RecordType : uint8_t {
  kMeta = 1,   // JSON: who wrote the file, generation; first record of a file
  kEntry = 2,  // JSON: the full current entry of one claim (latest wins)
};

std::string EncodeFileHeader(uint32_t version = kFormatVersion);
std::string EncodeRecord(uint8_t type, std::string_view payload);

enum class HeaderStatus {
  kOk,
  kEmpty,               // zero bytes: a file whose creation was interrupted
  kTruncated,           // shorter than a header
  kBadMagic,            // not a ledger at all
  kBadChecksum,         // header bytes damaged
  kUnsupportedVersion,  // written by a newer, incompatible format
};
const char* HeaderStatusName(HeaderStatus s);

struct DecodedRecord {
  uint64_t offset = 0;  // of the frame in the file
  uint64_t size = 0;    // frame size including the header
  uint8_t type = 0;
  std::string payload;
};

struct DamagedRange {
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string reason;
};

struct DecodedRecords {
  std::vector<DecodedRecord> records;
  std::vector<DamagedRange> damage;
  // Offset just past the last byte that belongs to a verified record.
  uint64_t valid_end = 0;
};

struct DecodedLog {
  HeaderStatus header = HeaderStatus::kOk;
  uint32_t version = 0;
  DecodedRecords body;
};

// Decodes records from `bytes`, which start at file offset `base_offset`.
// Damage is skipped by searching for the next frame that verifies.
DecodedRecords DecodeRecords(std::string_view bytes, uint64_t base_offset);

// Decodes a whole file: header, then records.
DecodedLog DecodeLog(std::string_view bytes);

}  // namespace nvdra::ledger
