#include "driver/engine.h"

#include <algorithm>
#include <set>

#include "ledger/claim_transitions.h"

#include "util/blocking_region.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/log.h"
#include "util/request_steps.h"

namespace nvdra::driver {

namespace {

using Steady = std::chrono::steady_clock;

Status CheckDeadline(Steady::time_point deadline, const std::string& step) {
  if (Steady::now() >= deadline) {
    return DeadlineExceeded("deadline passed before " + step + "; the kubelet will retry");
  }
  return Status::Ok();
}

}  // namespace

Engine::Engine(EngineOptions options, ledger::ClaimLedger& ledger, ClaimKind& kind, ClaimSource& claims,
               const cdi::CdiSpecWriter& cdi, metrics::DraMetrics* metrics)
    : options_(std::move(options)),
      driver_(kind.driver_name()),
      ledger_(ledger),
      kind_(kind),
      claims_(claims),
      cdi_(cdi),
      metrics_(metrics),
      locks_(ledger.dir()),
      metadata_(options_.metadata, kind),
      sweeper_(ledger, cdi, options_.metadata, locks_),
      recovery_(ledger, kind, cdi, locks_, [this](const std::vector<std::string>& held, const std::string& self_uid) {
        return ClearStaleHolders(held, self_uid);
      }) {
  // The ledger counts prepared devices by type as it applies records, so
  // the gauges cost the number of types per request.
  ledger_.SetDeviceClassifier([&kind](const std::string& device) {
    std::string t = kind.DeviceType(device);
    return t.empty() ? std::string("unknown") : t;
  });
  if (metrics_ != nullptr) metrics_->SetGaugeRefresh([this] { RefreshGauges(); });
}

Engine::~Engine() {
  if (metrics_ != nullptr) metrics_->SetGaugeRefresh(nullptr);
  ledger_.SetDeviceClassifier(nullptr);
}

std::optional<metrics::StepTimer> Engine::Time(metrics::PrepareStep step) const {
  if (metrics_ == nullptr) return std::nullopt;
  return std::optional<metrics::StepTimer>(std::in_place, *metrics_, step, *options_.clock);
}

kubelet::PrepareOutcome Engine::PrepareClaim(const model::ClaimRef& claim, Steady::time_point deadline) {
  bool ok = false;
  std::optional<metrics::DraMetrics::InflightScope> inflight;
  std::optional<metrics::StepTimer> request_timer;
  if (metrics_ != nullptr) {
    inflight.emplace(*metrics_, metrics::Operation::kPrepare);
    request_timer.emplace(*metrics_, metrics::Operation::kPrepare, ok, *options_.clock);
  }
  kubelet::PrepareOutcome out = Prepare(claim, deadline);
  if (out.ok()) {
    ok = true;
    NVDRA_INFO("Returning newly prepared devices for claim '{}': {} device(s)", claim.ToString(), out->size());
  } else {
    const Status s = out.status();  // a copy: `out` is replaced next
    out = s.Wrap("error preparing devices for claim " + claim.ToString());
    const std::string& error = out.status().message();
    if (metrics_ != nullptr) metrics_->RecordPrepareError(metrics::kErrorPrepareDevices);
    // The kubelet-facing layer logs the one line of a failed claim.
    if (s.permanent() && options_.on_permanent_failure) options_.on_permanent_failure(claim, error);
  }
  request_timer.reset();
  return out;
}

void Engine::RecordSteps(bool prepare, const RequestSteps& steps, bool whole_request) {
  if (metrics_ == nullptr) return;
  metrics_->AddRequestSteps(prepare ? metrics::Operation::kPrepare : metrics::Operation::kUnprepare, steps,
                            whole_request);
}

Result<Engine::Devices> Engine::Prepare(const model::ClaimRef& ref, Steady::time_point deadline) {
  // A claim this process or another completed in this boot, under this
  // UID and name: the UID pins the object, and its allocation changes only
  // after every consumer is gone (then the kubelet unprepares it, or the
  // reconciler does once the API server shows it deallocated). A repeated
  // Prepare (another pod sharing the claim, a kubelet retry or restart)
  // is answered from the ledger without asking the API server
  // (docs/ledger-format.md, "Repeated Prepare"). The look without the
  // claim's locks (ClaimLedger::PeekState) only picks the path: a first
  // Prepare takes the locks once, below, where the ledger is read again.
  NVDRA_ASSIGN_OR_RETURN(std::optional<ledger::ClaimState> seen, ledger_.PeekState(ref.uid));
  bool was_completed = seen == ledger::ClaimState::kPrepareCompleted;
  if (was_completed) {
    NVDRA_ASSIGN_OR_RETURN(ClaimLock lock, LockClaim(ref.uid, deadline));
    NVDRA_ASSIGN_OR_RETURN(auto recorded, ledger_.Get(ref.uid));
    if (recorded && recorded->state == ledger::ClaimState::kPrepareCompleted && !recorded->from_earlier_boot &&
        !recorded->allocation.empty() && recorded->ns == ref.ns && recorded->name == ref.name &&
        recorded->origin != ledger::ClaimOrigin::kRebuilt && metadata_.Present(*recorded)) {
      return AlreadyPrepared(*recorded, nullptr);
    }
    was_completed = recorded && recorded->state == ledger::ClaimState::kPrepareCompleted;
  }
  NVDRA_ASSIGN_OR_RETURN(ClaimSnapshot snap, FetchClaim(ref, deadline));
  NVDRA_ASSIGN_OR_RETURN(ClaimWork work, OurResults(ref, snap));
  if (work.results.empty()) return Devices{};
  work.deadline = deadline;
  if (was_completed) {
    // A claim completed in this boot answers from the ledger before its
    // configs and the kind's readiness gate are checked again: a repeated
    // Prepare must return the recorded devices even when, say, the
    // ComputeDomain's daemon is restarting or a feature gate changed since.
    // A claim that was not completed a moment ago (a first Prepare) skips
    // this look: only another process can have completed it since, and the
    // look under the claim's locks below answers that case (after the
    // configs and the gate, which a first Prepare checks anyway).
    NVDRA_ASSIGN_OR_RETURN(ClaimLock lock, LockClaim(ref.uid, deadline));
    NVDRA_ASSIGN_OR_RETURN(std::optional<Devices> recorded, CompletedThisBoot(work, snap));
    if (recorded) return std::move(*recorded);
  }
  // Configs, plan and readiness write nothing, so they run without the
  // claim's locks: the kind's readiness gate may wait (a ComputeDomain
  // channel claim waits for its IMEX daemon), and an Unprepare of this claim
  // must not queue behind that wait.
  NVDRA_ASSIGN_OR_RETURN(ClaimPlan plan, PlanClaim(work, snap));
  // From here to the end no other operation, in this process or another,
  // works on this claim: an unprepare would otherwise undo devices between
  // our device work and our CDI write, leaving a spec or a sharing setting
  // nobody removes.
  std::optional<ClaimLock> lock;
  {
    auto locked = LockClaim(ref.uid, deadline);
    if (!locked.ok()) return locked.status();
    lock.emplace(std::move(*locked));
  }
  NVDRA_RETURN_IF_ERROR(CheckDeadline(deadline, "recording the claim"));
  // Another Prepare of this claim may have completed it while we planned:
  // BeginPrepare says so (kAlreadyPrepared, having taken the name an
  // imported or rebuilt entry lacked) in the same read of the ledger that
  // would record PrepareStarted.
  NVDRA_ASSIGN_OR_RETURN(ledger::BeginResult begin, Begin(work, plan, snap));
  if (begin.outcome == ledger::BeginOutcome::kAlreadyPrepared) return AlreadyPrepared(begin.entry, &snap);
  if (begin.outcome == ledger::BeginOutcome::kRedoAfterReboot) {
    NVDRA_INFO("Claim {} was prepared before the node rebooted; redoing its node-side work", ref.ToString());
  }
  return PrepareDevices(work, plan, snap, begin.entry.attempt, lock);
}

// Step 1: the claim as the API server has it now.
Result<ClaimSnapshot> Engine::FetchClaim(const model::ClaimRef& ref, Steady::time_point deadline) {
  auto timer = Time(metrics::PrepareStep::kFetchClaim);
  TimedStep step(RequestStep::kClaimGet);
  auto snap = claims_.GetUntil(ref.ns, ref.name, deadline);
  if (!snap.ok()) return snap.status().Wrap("retrieve claim " + ref.ObjectName());
  if (snap->uid != ref.uid) {
    return FailedPrecondition("claim " + ref.ObjectName() + " got replaced (the API server has UID " + snap->uid +
                              ", the kubelet asked for " + ref.uid + ")");
  }
  if (!snap->allocated) return FailedPrecondition("claim " + ref.ObjectName() + " not allocated");
  return snap;
}

// Step 2: our results only, each a device this node publishes.
Result<ClaimWork> Engine::OurResults(const model::ClaimRef& ref, const ClaimSnapshot& snap) const {
  TimedStep step(RequestStep::kConfig);
  ClaimWork work{ref.uid, ref.ns, ref.name, {}, {}};
  for (const auto& r : snap.results) {
    if (r.driver != driver_) continue;
    // Device names repeat on every node ("gpu-0"): only the pool, which is
    // the node's name, says whose device the scheduler picked. Preparing
    // another node's allocation would hand this node's device to the claim
    // behind the scheduler's back.
    if (!options_.node_name.empty() && r.pool != options_.node_name) {
      return FailedPrecondition("claim " + ref.ObjectName() + " is allocated to node " + r.pool + " (device " +
                                r.device + ", request " + r.request + "), not to this node " + options_.node_name +
                                "; it cannot be prepared here")
          .AsPermanent();
    }
    if (kind_.DeviceType(r.device).empty()) {
      // Upstream's phrase first ("requested device is not allocatable: %v"),
      // then where to look.
      return NotFound("requested device is not allocatable: " + r.device + " (request " + r.request +
                      ") is not among the devices this plugin publishes on this node")
          .AsPermanent();
    }
    work.results.push_back(r);
  }
  return work;
}

Result<std::optional<Engine::Devices>> Engine::CompletedThisBoot(const ClaimWork& work, const ClaimSnapshot& snap) {
  NVDRA_ASSIGN_OR_RETURN(auto recorded, ledger_.Get(work.uid));
  if (!recorded || recorded->state != ledger::ClaimState::kPrepareCompleted || recorded->from_earlier_boot ||
      !ledger::SameAllocation(recorded->allocation, work.results)) {
    return std::optional<Devices>();
  }
  if (recorded->name.empty()) {
    // An imported or rebuilt entry learns its claim's name from the first
    // Prepare that carries it, so the reconciler can look the claim up.
    NVDRA_RETURN_IF_ERROR(ledger_.AdoptName(work.uid, work.ns, work.name));
  }
  NVDRA_ASSIGN_OR_RETURN(Devices devices, AlreadyPrepared(*recorded, &snap));
  return std::optional<Devices>(std::move(devices));
}

// Step 3: configs, the kind's plan and readiness, before anything durable.
Result<ClaimPlan> Engine::PlanClaim(ClaimWork& work, const ClaimSnapshot& snap) {
  TimedStep step(RequestStep::kConfig);
  auto type_of = [this](const model::AllocationResult& r) { return kind_.DeviceType(r.device); };
  auto groups = config::ResolveConfigs(kind_.ConfigRules(options_.gates), snap.configs, work.results, type_of,
                                       options_.gates);
  if (!groups.ok()) return groups.status().AsPermanent();
  work.groups = std::move(groups).value();
  auto plan = kind_.Plan(work);
  if (!plan.ok()) return plan.status().retryable() ? plan.status() : plan.status().AsPermanent();
  const bool may_wait = kind_.MayWaitUntilReady(work, *plan);
  if (may_wait) {
    std::vector<std::string> requested = ledger::DefaultHeld(work.results);
    NVDRA_RETURN_IF_ERROR(RefuseHeldElsewhere(plan->held.empty() ? requested : plan->held, requested, work.uid));
  }
  {
    // A claim that may wait for a gate (the domain's IMEX daemon) lets
    // other claims run meanwhile.
    std::optional<BlockingRegion> waiting;
    if (may_wait) waiting.emplace();
    NVDRA_RETURN_IF_ERROR(kind_.CheckReady(work, *plan));
  }
  return plan;
}

// Step 4: PrepareStarted, durably, before any device is touched.
Result<ledger::BeginResult> Engine::Begin(const ClaimWork& work, const ClaimPlan& plan, const ClaimSnapshot& snap) {
  ledger::BeginPrepareRequest req;
  req.uid = work.uid;
  req.ns = work.ns;
  req.name = work.name;
  req.allocation = work.results;
  if (!plan.held.empty()) req.held = plan.held;
  req.shares = plan.shares;
  req.undo = plan.undo;
  req.consumers = snap.consumers;
  auto timer = Time(metrics::PrepareStep::kLedgerBegin);
  auto begin = ledger_.BeginPrepare(req);
  if (!begin.ok() && begin.status().code() == StatusCode::kConflict) {
    std::vector<std::string> held = req.held ? *req.held : ledger::DefaultHeld(req.allocation);
    if (ClearStaleHolders(held, work.uid)) begin = ledger_.BeginPrepare(req);
  }
  return begin;
}

// Steps 5-7: the device work, the CDI spec, PrepareCompleted.
Result<Engine::Devices> Engine::PrepareDevices(const ClaimWork& work, const ClaimPlan& plan, const ClaimSnapshot& snap,
                                               const std::string& attempt, std::optional<ClaimLock>& lock) {
  std::optional<PreparedClaim> prepared;
  {
    auto timer = Time(metrics::PrepareStep::kDevicePrepare);
    TimedStep step(RequestStep::kKindWork);
    NVDRA_ASSIGN_OR_RETURN(prepared, kind_.Prepare(work, plan));
  }
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-device-prepare"));
  if (prepared->await_ready) NVDRA_RETURN_IF_ERROR(AwaitWithoutLocks(work, prepared->undo, attempt, lock));
  std::optional<TimedStep> cdi_step(std::in_place, RequestStep::kCdi);
  ClaimOutput output = BuildClaimOutput(cdi_, work.uid, work.results, std::move(prepared->edits), work.ns, work.name);
  if (!output.spec.devices.empty()) {
    auto timer = Time(metrics::PrepareStep::kCdiWrite);
    NVDRA_RETURN_IF_ERROR(cdi_.WriteClaimSpec(work.uid, output.spec).Wrap("unable to create CDI spec file for claim"));
  }
  cdi_step.reset();
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-cdi-write"));
  if (metadata_.enabled() && options_.gates.Enabled(config::Gate::kDeviceMetadata)) {
    NVDRA_RETURN_IF_ERROR(metadata_.Write(snap, work.results, &output.devices));
    NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-metadata-write"));
  }
  auto timer = Time(metrics::PrepareStep::kLedgerComplete);
  NVDRA_RETURN_IF_ERROR(ledger_.CompletePrepare(work.uid, output.devices, std::move(prepared->undo), attempt));
  return std::move(output.devices);
}

Status Engine::AwaitWithoutLocks(const ClaimWork& work, const nlohmann::json& undo, const std::string& attempt,
                                 std::optional<ClaimLock>& lock) {
  // The entry stays PrepareStarted meanwhile, so an Unprepare (the kubelet
  // gave up, the pod went away) or the reconciler can undo what Prepare did.
  lock.reset();
  {
    BlockingRegion waiting;  // other claims run meanwhile
    NVDRA_RETURN_IF_ERROR(kind_.AwaitReady(work, undo));
  }
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-await-ready"));
  auto locked = LockClaim(work.uid, work.deadline);
  if (!locked.ok()) return locked.status();
  lock.emplace(std::move(*locked));
  NVDRA_ASSIGN_OR_RETURN(auto entry, ledger_.Get(work.uid));
  if (!entry || entry->state != ledger::ClaimState::kPrepareStarted || entry->attempt != attempt) {
    return Unavailable("claim " + work.ns + "/" + work.name +
                       " was unprepared or prepared again while it waited to become ready; the next Prepare "
                       "starts over");
  }
  return Status::Ok();
}

Result<Engine::Devices> Engine::AlreadyPrepared(const ledger::ClaimEntry& entry, const ClaimSnapshot* snap) {
  // Idempotent: same devices, nothing durable changes; only re-ensure the
  // CDI spec (tmpfs may have lost it), rebuilt from the undo record the way
  // the first Prepare built it.
  TimedStep step(RequestStep::kCdi);
  std::vector<std::string> names;
  for (const auto& d : entry.prepared) names.push_back(d.device);
  auto edits = kind_.Edits(entry.undo, names);
  if (!edits.ok()) return edits.status().Wrap("rebuild CDI spec");
  ClaimOutput output = BuildClaimOutput(cdi_, entry.uid, entry.allocation, std::move(edits).value(), entry.ns,
                                        entry.name);
  if (!output.spec.devices.empty()) {
    NVDRA_RETURN_IF_ERROR(cdi_.WriteClaimSpec(entry.uid, output.spec).Wrap("write CDI spec"));
  }
  // The recorded devices say whether the claim has metadata (the gate may
  // have changed since): the answer stays the recorded one either way.
  if (snap != nullptr && metadata_.Recorded(entry)) {
    NVDRA_RETURN_IF_ERROR(metadata_.Write(*snap, entry.allocation, nullptr));
  }
  NVDRA_VLOG(2, "Prepare of claim {} already completed; returning the recorded devices",
             model::ClaimRef{entry.ns, entry.uid, entry.name}.ToString());
  return entry.prepared;
}

Status Engine::RefuseHeldElsewhere(const std::vector<std::string>& held, const std::vector<std::string>& requested,
                                   const std::string& self_uid) {
  // The ledger's own scan, so the refusal reads as the one BeginPrepare gives.
  ledger::TransitionContext ctx;
  ctx.codec = ledger_.codec();
  Status lookup = Status::Ok();
  ctx.other_holder = [&](const std::string& resource, const std::string& except) -> std::optional<std::string> {
    auto holder = ledger_.HolderOf(resource);
    if (!holder.ok()) {
      if (lookup.ok()) lookup = holder.status();
      return std::nullopt;
    }
    if (!holder->has_value() || (*holder)->uid == except) return std::nullopt;
    return (*holder)->uid;
  };
  for (bool cleared = false;; cleared = true) {
    Status refusal = ledger::CheckNotHeldByOthers(held, requested, self_uid, ctx);
    NVDRA_RETURN_IF_ERROR(lookup);
    if (refusal.ok()) return refusal;
    if (cleared || !ClearStaleHolders(held, self_uid)) return refusal;
  }
}

bool Engine::ClearStaleHolders(const std::vector<std::string>& held, const std::string& self_uid) {
  std::set<std::string> checked;
  bool freed = false;
  for (const auto& resource : held) {
    // Every holder: the shares of a device (consumable shares) have several.
    auto holders = ledger_.HoldersOf(resource, self_uid);
    if (!holders.ok()) continue;
    for (const ledger::ClaimEntry& h : *holders) {
      if (!checked.insert(h.uid).second) continue;
      // A half-prepared holder, one prepared before the node rebooted, or
      // one rebuilt from its CDI spec after the ledger was lost: no kubelet
      // call may ever release it, so check its claim now.
      const bool earlier_boot = h.state == ledger::ClaimState::kPrepareCompleted && h.from_earlier_boot;
      const bool rebuilt = h.origin == ledger::ClaimOrigin::kRebuilt;
      if ((h.state != ledger::ClaimState::kPrepareStarted && !earlier_boot && !rebuilt) || h.name.empty()) continue;
      Judgement j = JudgeClaim(h, claims_.Get(h.ns, h.name), options_.node_name);
      if (j.standing != ClaimStanding::kGone && j.standing != ClaimStanding::kStale) continue;
      if (UnprepareEntry(h, j.why + " and another claim needs " + resource).ok()) freed = true;
    }
  }
  return freed;
}

Status Engine::UnprepareClaim(const model::ClaimRef& claim, Steady::time_point deadline) {
  bool ok = false;
  std::optional<metrics::DraMetrics::InflightScope> inflight;
  std::optional<metrics::StepTimer> request_timer;
  if (metrics_ != nullptr) {
    inflight.emplace(*metrics_, metrics::Operation::kUnprepare);
    request_timer.emplace(*metrics_, metrics::Operation::kUnprepare, ok, *options_.clock);
  }
  Status s = Unprepare(claim, deadline);
  ok = s.ok();
  if (!ok && metrics_ != nullptr) metrics_->RecordUnprepareError(metrics::kErrorUnprepareDevices);
  request_timer.reset();
  if (s.ok()) return s;
  // The kubelet-facing layer logs the one line of a failed claim.
  return s.Wrap("error unpreparing devices for claim " + claim.ToString());
}

Status Engine::Unprepare(const model::ClaimRef& ref, Steady::time_point deadline) {
  NVDRA_ASSIGN_OR_RETURN(ClaimLock lock, LockClaim(ref.uid, deadline));
  auto entry = ledger_.BeginUnprepare(ref.uid);
  if (!entry.ok()) return entry.status();
  if (!entry->has_value()) {
    NVDRA_VLOG(2, "Unprepare noop: claim not found in checkpoint data: {}", ref.ToString());
    return Status::Ok();
  }
  NVDRA_RETURN_IF_ERROR(UnprepareLocked(**entry));
  NVDRA_VLOG(1, "Unprepared devices for claim '{}'", ref.ToString());
  return Status::Ok();
}

Status Engine::UnprepareLocked(const ledger::ClaimEntry& entry) {
  {
    TimedStep step(RequestStep::kKindWork);
    NVDRA_RETURN_IF_ERROR(kind_.Unprepare(entry.uid, entry.undo));
  }
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-device-unprepare"));
  {
    TimedStep step(RequestStep::kCdi);
    NVDRA_RETURN_IF_ERROR(cdi_.RemoveClaimSpec(entry.uid).Wrap("remove CDI spec"));
  }
  // With device metadata off, a claim whose completed prepare recorded no
  // metadata id wrote none, and its unprepare looks for none. (Files of an
  // earlier attempt that crashed while the gate was on have no live entry
  // once this claim is gone: the reconciler's sweep removes them.)
  const bool may_have_metadata = options_.gates.Enabled(config::Gate::kDeviceMetadata) || entry.prepared.empty() ||
                                 metadata_.Recorded(entry);
  if (may_have_metadata) NVDRA_RETURN_IF_ERROR(metadata_.Remove(entry));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-metadata-remove"));
  return ledger_.FinishUnprepare(entry.uid);
}

Status Engine::UnprepareEntry(const ledger::ClaimEntry& stale, const std::string& why) {
  // Bounded: the caller may hold another claim's lock (a conflict check).
  auto bound = Steady::now() + std::chrono::seconds(10);
  NVDRA_ASSIGN_OR_RETURN(ClaimLock lock, LockClaim(stale.uid, bound));
  auto entry = ledger_.BeginUnprepare(stale.uid);
  if (!entry.ok()) return entry.status();
  if (!entry->has_value()) return Status::Ok();
  Status s = UnprepareLocked(**entry);
  std::string ref = model::ClaimRef{stale.ns, stale.uid, stale.name}.ToString();
  if (s.ok() && stale.name.empty()) {
    NVDRA_WARN("released claim {}, whose name is unknown so its ResourceClaim cannot be checked: {}", stale.uid, why);
  } else if (s.ok()) {
    // Upstream's words, which operators grep for.
    NVDRA_INFO("Checkpointed RC cleanup: unprepared stale claim: {}/{} (claim {}: {})", stale.ns, stale.name, stale.uid,
               why);
  } else {
    NVDRA_WARN("unprepare of stale claim {} failed, will retry: {}", ref, s.message());
  }
  return s;
}

Result<std::vector<ledger::ClaimEntry>> Engine::Entries() { return ledger_.List(); }

Status Engine::Carry(const ledger::ClaimEntry& entry, const Decision& decision) {
  if (decision.action != Action::kUnprepare) return Status::Ok();
  std::string why = decision.judgement.why;
  if (entry.state == ledger::ClaimState::kPrepareCompleted) why += ", past the grace period";
  return UnprepareEntry(entry, why);
}

Status Engine::CollectGarbage() { return ledger_.CollectGarbage(); }

void Engine::RefreshGauges() {
  if (metrics_ == nullptr) return;
  // The ledger keeps these counts as records are applied: the cost here is
  // the device types and the four states, not the entries in the ledger.
  ledger::LedgerCounts counts = ledger_.Counts();
  std::map<std::string, int64_t> devices, states;
  for (size_t i = 0; i < ledger::kClaimStateCount; ++i) {
    states[ledger::ClaimStateName(static_cast<ledger::ClaimState>(i))] = counts.claims[i];
  }
  for (const auto& [type, n] : counts.prepared_devices) devices[type] += n;
  metrics_->SetPreparedDeviceCounts(devices);
  metrics_->SetLedgerClaimCounts(states);
  metrics_->SetLedgerBytes(static_cast<double>(counts.bytes));
}

}  // namespace nvdra::driver
