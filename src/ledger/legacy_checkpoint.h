// The Go driver's checkpoint.json (see the upstream reference, "Checkpoint
// format"): importing it, so that replacing the Go plugin with this one keeps
// every prepared claim unpreparable, and writing one from the ledger, so that
// a rollback to the Go plugin does too.
//
// Checksums are verified the way a reader that is not the Go program can: the
// FNV-1a hash of the raw "v2" (and "v1") text as stored, with its checksum
// field replaced by 0. For files the Go driver wrote that is exactly what it
// computes over its own re-serialisation. A mismatch is refused, as upstream
// refuses it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ledger/claim_entry.h"
#include "ledger/kind_codec.h"
#include "util/status.h"

namespace nvdra::ledger {

inline constexpr const char* kLegacyCheckpointFileName = "checkpoint.json";
// The Go driver's prepare/unprepare lock in the same directory.
inline constexpr const char* kLegacyPrepareLockFileName = "pu.lock";
// Nesting the Go driver's files never come near; deeper input is refused
// before the parser recurses.
inline constexpr int kMaxLegacyJsonDepth = 64;
// The largest checkpoint.json imported: 64 MiB, some 140,000 claims of one
// GPU each, far beyond what a node prepares. A larger file is refused (the
// plugin keeps every CDI spec and rebuilds the claims from them), never
// read into memory.
inline constexpr uint64_t kMaxLegacyCheckpointBytes = 64ull << 20;

struct LegacyImport {
  std::vector<ClaimEntry> entries;
  std::string node_boot_id;  // v2.nodeBootID; empty in old files
  // "v1=<n> v2=<n>": which file was imported (recorded in the ledger's meta).
  std::string checksums;
  std::vector<std::string> warnings;
};

// Upstream's checksum of a marshalled checkpoint part: FNV-1a 32 over
// "([]uint8)[" + the decimal byte values joined by single spaces + "]".
uint32_t GoChecksum(std::string_view marshalled);

// The members of the JSON object `text` as raw text (key, value), in file
// order, without re-serialising anything. Error on malformed input or nesting
// deeper than kMaxLegacyJsonDepth.
Result<std::vector<std::pair<std::string, std::string_view>>> RawObjectMembers(std::string_view text);
// The elements of the JSON array `text` as raw text, likewise.
Result<std::vector<std::string_view>> RawArrayElements(std::string_view text);

// `codec` (the kind's; nullptr: keep every allocation result, each device
// holding its name) filters allocation results to its driver and names what
// each device holds.
// The undo record is the kind's own (KindCodec::ImportUndo), so the device
// kind undoes what the Go driver did; the whole upstream claim object is kept
// beside it in undo["legacyCheckpoint"] (and its exact text in
// undo["legacyCheckpointJson"]) so an export can give it back unchanged.
// DataLoss when the checksums do not verify.
Result<LegacyImport> ParseLegacyCheckpoint(std::string_view json_text, const KindCodec* codec,
                                           const std::string& current_boot_id);

// The checkpoint `release` of the Go driver reads, holding `entries` (live
// claims; others are skipped) for `boot_id` (left out for a release before
// the boot id). Claims imported from a Go checkpoint are given back as they
// were read, their prepared groups as `release` marshals them; native ones
// are described by `codec` (see docs/migration.md for what the Go driver can
// and cannot undo of those; without a codec their devices cannot be
// described: half prepared).
std::string WriteLegacyCheckpoint(const std::vector<ClaimEntry>& entries, const std::string& boot_id,
                                  const KindCodec* codec, UpstreamRelease release = kLatestUpstreamRelease);

// Prepared device groups (raw JSON, as the Go driver or a codec wrote them)
// as `release` marshals them: each CheckpointedDevice without the fields
// that release does not know, each configState through the codec. Text that
// is not an array of groups is kept.
std::string UpstreamGroupsForRelease(std::string_view groups, const KindCodec* codec, UpstreamRelease release);

}  // namespace nvdra::ledger
