// libFuzzer target for the device kinds' undo records (the JSON the ledger
// keeps per claim for Unprepare): whatever a damaged, hand-edited or newer
// ledger holds must decode to a value or an error, never an exception or a
// crash, and a decoded record must survive re-encoding unchanged, in memory
// and through the text the ledger writes, so that a record an older binary
// rewrote still tells a newer one everything. Also built as a plain replay
// test (undo_record_replay_test.cc) so every build runs it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "computedomain/compute_domain_undo.h"
#include "gpu/gpu_undo_pieces.h"
#include "util/json_depth.h"
#include "util/json_reader.h"

namespace {

using nlohmann::json;

void Check(bool ok) {
  if (!ok) std::abort();
}

// What the ledger does with a record: it stores the dump and parses it back.
json ThroughText(const json& j) { return json::parse(j.dump(), nullptr, /*allow_exceptions=*/false); }

template <typename Record, typename Decode, typename Encode>
void RoundTrip(const json& j, Decode decode, Encode encode) {
  nvdra::Result<Record> first = decode(j);
  if (!first.ok()) {
    Check(first.status().code() == nvdra::StatusCode::kInvalidArgument);
    return;
  }
  json encoded = encode(*first);
  nvdra::Result<Record> again = decode(encoded);
  Check(again.ok());
  Check(*again == *first);
  Check(encode(*again) == encoded);
  // Through text, compared as text: a number JSON cannot spell (1e400 reads
  // as infinity) is written as null by any encoder, ours included.
  nvdra::Result<Record> from_text = decode(ThroughText(encoded));
  Check(from_text.ok());
  Check(ThroughText(encode(*from_text)) == ThroughText(encoded));
}

// The reader the decoders use: any read of any document is a value or an
// error value, and unknown members survive a merge.
void Reader(const json& j) {
  nvdra::JsonReader r(j, "fuzzed record");
  Check(r.ExpectObject().ok() == j.is_object());
  for (const char* key : {"version", "devices", "timeSlicing", "channels", "x"}) {
    (void)r.Optional<std::string>(key);
    (void)r.Optional<int64_t>(key);
    (void)r.Optional<int>(key);
    (void)r.Optional<bool>(key);
    (void)r.Optional<std::vector<std::string>>(key);
    (void)r.ForEach(key, [](const nvdra::JsonReader& item) { return item.Optional<std::string>("uuid").status(); });
  }
  if (!j.is_object()) return;
  json unknown = r.Unknown({"version", "devices"});
  Check(unknown.is_object() && !unknown.contains("version") && !unknown.contains("devices"));
  json out = json::object();
  nvdra::MergeUnknownMembers(out, j);
  Check(out.size() == j.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  // The ledger refuses records nested deeper than this before decoding them.
  if (!nvdra::CheckJsonDepth(text, "undo record").ok()) return 0;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  RoundTrip<nvdra::gpu::GpuUndo>(
      j, [](const json& x) { return nvdra::gpu::DecodeGpuUndo(x); }, nvdra::gpu::EncodeGpuUndo);
  RoundTrip<nvdra::computedomain::ComputeDomainUndo>(j, nvdra::computedomain::DecodeComputeDomainUndo,
                                                     nvdra::computedomain::EncodeComputeDomainUndo);
  Reader(j);
  return 0;
}
