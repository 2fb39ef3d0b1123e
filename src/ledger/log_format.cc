#include "ledger/log_format.h"

#include "ledger/crc32c.h"

namespace nvdra::ledger {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint32_t GetU32(std::string_view s, size_t pos) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(s[pos + i])) << (8 * i);
  return v;
}

// Whether a verified frame starts at `pos`; on success sets its payload size.
bool FrameAt(std::string_view bytes, size_t pos, uint32_t* length) {
  if (bytes.size() - pos < kRecordHeaderSize) return false;
  uint32_t len = GetU32(bytes, pos + 4);
  if (len > kMaxRecordPayload || len > bytes.size() - pos - kRecordHeaderSize) return false;
  uint32_t want = GetU32(bytes, pos);
  if (Crc32c(bytes.substr(pos + 4, 5 + size_t(len))) != want) return false;
  *length = len;
  return true;
}

}  // namespace

std::string EncodeFileHeader(uint32_t version) {
  std::string h(kFileMagic);
  PutU32(h, version);
  PutU32(h, Crc32c(h));
  return h;
}

std::string EncodeRecord(uint8_t type, std::string_view payload) {
  std::string r;
  r.reserve(kRecordHeaderSize + payload.size());
  PutU32(r, 0);
  PutU32(r, static_cast<uint32_t>(payload.size()));
  r.push_back(static_cast<char>(type));
  r.append(payload);
  uint32_t crc = Crc32c(std::string_view(r).substr(4));
  for (int i = 0; i < 4; ++i) r[i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  return r;
}

const char* HeaderStatusName(HeaderStatus s) {
  switch (s) {
    case HeaderStatus::kOk: return "ok";
    case HeaderStatus::kEmpty: return "empty file";
    case HeaderStatus::kTruncated: return "truncated header";
    case HeaderStatus::kBadMagic: return "not a ledger file (bad magic)";
    case HeaderStatus::kBadChecksum: return "header checksum mismatch";
    case HeaderStatus::kUnsupportedVersion: return "unsupported format version";
  }
  return "unknown";
}

DecodedRecords DecodeRecords(std::string_view bytes, uint64_t base_offset) {
  DecodedRecords out;
  out.valid_end = base_offset;
  size_t pos = 0;
  while (pos < bytes.size()) {
    uint32_t len = 0;
    if (FrameAt(bytes, pos, &len)) {
      DecodedRecord r;
      r.offset = base_offset + pos;
      r.size = kRecordHeaderSize + len;
      r.type = static_cast<uint8_t>(bytes[pos + 8]);
      r.payload.assign(bytes.substr(pos + kRecordHeaderSize, len));
      pos += r.size;
      out.valid_end = base_offset + pos;
      out.records.push_back(std::move(r));
      continue;
    }
    // Damage: find the next frame that verifies (a CRC32C false match has
    // probability 2^-32 per position, and the length check rejects most).
    size_t next = pos + 1;
    while (next < bytes.size() && !FrameAt(bytes, next, &len)) ++next;
    DamagedRange d;
    d.offset = base_offset + pos;
    d.length = next - pos;
    d.reason = next >= bytes.size() ? "torn or damaged tail" : "damaged record";
    out.damage.push_back(std::move(d));
    pos = next;
  }
  return out;
}

DecodedLog DecodeLog(std::string_view bytes) {
  DecodedLog log;
  if (bytes.empty()) {
    log.header = HeaderStatus::kEmpty;
    return log;
  }
  if (bytes.size() < kFileHeaderSize) {
    log.header = bytes.substr(0, std::min(bytes.size(), kFileMagic.size())) ==
                         kFileMagic.substr(0, std::min(bytes.size(), kFileMagic.size()))
                     ? HeaderStatus::kTruncated
                     : HeaderStatus::kBadMagic;
    return log;
  }
  if (bytes.substr(0, kFileMagic.size()) != kFileMagic) {
    log.header = HeaderStatus::kBadMagic;
    return log;
  }
  if (Crc32c(bytes.substr(0, 12)) != GetU32(bytes, 12)) {
    log.header = HeaderStatus::kBadChecksum;
    return log;
  }
  log.version = GetU32(bytes, 8);
  if (log.version != kFormatVersion) {
    log.header = HeaderStatus::kUnsupportedVersion;
    return log;
  }
  log.body = DecodeRecords(bytes.substr(kFileHeaderSize), kFileHeaderSize);
  return log;
}

}  // namespace nvdra::ledger
