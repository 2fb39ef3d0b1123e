// Fuzz target for reading a claim's CDI spec back (ledger recovery, nvdractl
// ledger rebuild): any bytes, as our JSON spec or as the Go driver's YAML,
// must be read or refused cleanly. What is read names devices of the claim
// (non-empty names) and, when it names the claim, a namespace and a name.
// A spec we render is read back as it was written.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cdi/cdi_spec_writer.h"
#include "cdi/spec.h"

namespace {

constexpr const char* kUid = "0b1c2d3e-4f50-4617-8899-aabbccddeeff";

void Check(const nvdra::Result<nvdra::cdi::CdiSpecWriter::ClaimSpecContents>& r) {
  if (!r.ok()) {
    if (r.status().code() != nvdra::StatusCode::kInvalidArgument) std::abort();
    return;
  }
  for (const auto& d : r->devices) {
    if (d.empty()) std::abort();
  }
  if (r->ns.empty() != r->name.empty()) std::abort();
  if (r->ns.find('/') != std::string::npos) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nvdra::cdi::CdiSpecWriter;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Check(CdiSpecWriter::ParseClaimSpec(text, /*yaml=*/false, kUid, "fuzz.json"));
  Check(CdiSpecWriter::ParseClaimSpec(text, /*yaml=*/true, kUid, "fuzz.yaml"));
  // The input's printable prefix as a device name and a claim name: a spec
  // we render from them reads back as written.
  std::string word;
  for (char c : text.substr(0, 40)) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') word.push_back(c);
  }
  if (word.empty() || word.front() == '-' || word.back() == '-') return 0;
  CdiSpecWriter w("/nonexistent", "k8s.gpu.nvidia.com");
  nvdra::cdi::Spec spec = w.BuildClaimSpec(kUid, {{"gpu-" + word, {}}}, {}, "ns-" + word, word);
  spec.devices[0].edits.env = {"X=1"};
  auto back = CdiSpecWriter::ParseClaimSpec(nvdra::cdi::RenderJson(spec), false, kUid, "rendered.json");
  if (!back.ok() || back->devices != std::vector<std::string>{"gpu-" + word} || back->ns != "ns-" + word ||
      back->name != word) {
    std::abort();
  }
  return 0;
}
