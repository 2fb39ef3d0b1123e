// libFuzzer target for opaque config parameters, the JSON users write into
// ResourceClaims and DeviceClasses: any bytes must decode or fail cleanly
// (no crash, no unbounded recursion), and whatever decodes must survive the
// canonical form the ledger keeps. Also built as a plain replay test (see
// config_decoder_fuzz_replay_test.cc) so every CI run exercises it. It
// decodes with every config kind nvdra's device kinds register.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cmd/config_kinds/config_kinds.h"
#include "config/config_decoder.h"
#include "config/feature_gates.h"
#include "config/opaque_config.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

// nvdra's config kinds, registered as the programs register them at start.
const bool kKindsRegistered = nvdra::RegisterNvdraConfigKinds().ok();

void Exercise(const nvdra::config::Config& decoded) {
  using namespace nvdra::config;
  // The canonical form decodes back to the same value.
  auto again = DecodeLenient(ToCanonicalJson(decoded));
  Check(again.ok() && *again == decoded);
  // Defaults and rules run on whatever decodes, with every gate on and off.
  static const FeatureGates off;
  static const FeatureGates all = *FeatureGates::Parse("AllAlpha=true,AllBeta=true");
  for (const FeatureGates* gates : {&off, &all}) {
    Config c = decoded;
    Normalize(c, *gates);
    (void)Validate(c, *gates);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nvdra::config;
  Check(kKindsRegistered);
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto strict = DecodeStrict(text);
  auto lenient = DecodeLenient(text);
  if (strict.ok()) {
    // Lenient accepts a superset of strict and agrees on what both accept.
    Check(lenient.ok() && *lenient == *strict);
    Exercise(*strict);
  } else {
    Check(!strict.status().message().empty());
  }
  if (lenient.ok()) Exercise(*lenient);
  return 0;
}
