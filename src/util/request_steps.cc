#include "util/request_steps.h"

namespace nvdra {

std::string_view RequestStepName(RequestStep step) {
  switch (step) {
    case RequestStep::kRpcOther: return "rpc_other";
    case RequestStep::kDispatch: return "dispatch";
    case RequestStep::kAnswer: return "answer";
    case RequestStep::kEngineOther: return "engine_other";
    case RequestStep::kClaimLock: return "claim_lock";
    case RequestStep::kLedgerRead: return "ledger_read";
    case RequestStep::kClaimGet: return "claim_get";
    case RequestStep::kConfig: return "config";
    case RequestStep::kAppendStarted: return "append_started";
    case RequestStep::kSyncStarted: return "fdatasync_started";
    case RequestStep::kKindWork: return "kind_work";
    case RequestStep::kCdi: return "cdi";
    case RequestStep::kAppendFinal: return "append_final";
    case RequestStep::kLogging: return "logging";
  }
  return "unknown";
}

}  // namespace nvdra
