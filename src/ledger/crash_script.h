// The scripted claim sequence the crash matrix runs in a child process
// (ledger_crash_helper) and replays as a model in the parent, so the parent
// knows which states every acknowledged prefix of the script allows.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ledger/claim_entry.h"

namespace nvdra::ledger::crash {

enum class Op { kBegin, kBeginConflict, kComplete, kBeginUnprepare, kFinishUnprepare, kCompact };

struct Step {
  Op op;
  std::string uid;
  std::vector<std::string> devices;
};

inline const std::vector<Step>& Script() {
  static const std::vector<Step> steps = {
      {Op::kBegin, "claim-a", {"gpu-0", "gpu-1"}},
      {Op::kComplete, "claim-a", {"gpu-0", "gpu-1"}},
      {Op::kBegin, "claim-b", {"gpu-2"}},
      {Op::kBeginConflict, "claim-c", {"gpu-0"}},
      {Op::kBeginUnprepare, "claim-a", {}},
      {Op::kFinishUnprepare, "claim-a", {}},
      {Op::kComplete, "claim-b", {"gpu-2"}},
      {Op::kBegin, "claim-c", {"gpu-0"}},
      {Op::kCompact, "", {}},
      {Op::kComplete, "claim-c", {"gpu-0"}},
      {Op::kBeginUnprepare, "claim-b", {}},
      {Op::kFinishUnprepare, "claim-b", {}},
  };
  return steps;
}

// Every failpoint the ledger reaches while running the script; the crash
// matrix crashes at each hit of each, as counted by a dry run.
inline const std::vector<std::string>& LedgerFailpoints() {
  static const std::vector<std::string> points = {
      "ledger-before-started-write",
      "ledger-after-started-write",
      "ledger-before-completed-write",
      "ledger-after-completed-write",
      "ledger-before-unprepare-write",
      "ledger-after-unprepare-write",
      "ledger-before-tombstone-write",
      "ledger-after-tombstone-write",
      "ledger-before-compaction-rename",
      "ledger-after-compaction-rename",
      "ledger-mid-append",
  };
  return points;
}

// Claim states after the first `n` steps (absent: never recorded).
inline std::map<std::string, ClaimState> StatesAfter(size_t n) {
  std::map<std::string, ClaimState> s;
  for (size_t i = 0; i < n && i < Script().size(); ++i) {
    const Step& st = Script()[i];
    switch (st.op) {
      case Op::kBegin: s[st.uid] = ClaimState::kPrepareStarted; break;
      case Op::kComplete: s[st.uid] = ClaimState::kPrepareCompleted; break;
      case Op::kBeginUnprepare: s[st.uid] = ClaimState::kUnprepareStarted; break;
      case Op::kFinishUnprepare: s[st.uid] = ClaimState::kTombstone; break;
      case Op::kBeginConflict:
      case Op::kCompact: break;
    }
  }
  return s;
}

}  // namespace nvdra::ledger::crash
