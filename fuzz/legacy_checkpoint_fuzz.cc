// libFuzzer target for the import of the Go driver's checkpoint.json: any
// bytes (a truncated write, a file from another version, a hostile file)
// must parse or be refused without crashing, recursing without bound, or
// importing a claim the file does not name; whatever imports must export
// and import again to the same claims. Also built as a plain replay test
// (legacy_checkpoint_replay_test.cc) so every CI run exercises it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ledger/legacy_checkpoint.h"
#include "util/uid.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nvdra::ledger;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto imported = ParseLegacyCheckpoint(text, nullptr, "boot-now");
  if (!imported.ok()) return 0;
  for (const auto& e : imported->entries) {
    Check(nvdra::IsValidClaimUid(e.uid));
    Check(text.find(e.uid) != std::string_view::npos);
    Check(e.state == ClaimState::kPrepareStarted || e.state == ClaimState::kPrepareCompleted);
  }
  // A rollback of what was imported is accepted by the import again.
  std::string exported = WriteLegacyCheckpoint(imported->entries, "boot-now", nullptr);
  auto again = ParseLegacyCheckpoint(exported, nullptr, "boot-now");
  Check(again.ok());
  Check(again->entries.size() == imported->entries.size());
  for (size_t i = 0; i < again->entries.size(); ++i) {
    Check(again->entries[i].uid == imported->entries[i].uid);
  }
  return 0;
}
