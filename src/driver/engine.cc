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

Status ClaimBusy() {
  return DeadlineExceeded("another operation on this claim is still running; the kubelet will retry");
}

}  // namespace

ClaimOutput BuildClaimOutput(const cdi::CdiSpecWriter& cdi, const std::string& claim_uid,
                             const std::vector<model::AllocationResult>& results, ClaimEdits edits,
                             const std::string& claim_namespace, const std::string& claim_name) {
  ClaimOutput out;
  std::vector<cdi::SpecDevice> devs;
  devs.reserve(edits.devices.size());
  std::set<std::string> with_edits;
  for (auto& d : edits.devices) {
    with_edits.insert(d.device);
    devs.push_back({std::move(d.device), std::move(d.edits)});
  }
  out.spec = cdi.BuildClaimSpec(claim_uid, std::move(devs), std::move(edits.common), claim_namespace, claim_name);
  for (const auto& r : results) {
    model::PreparedDevice d;
    d.requests = {r.request};
    d.pool = r.pool;
    d.device = r.device;
    if (with_edits.count(r.device)) d.cdi_device_ids = {cdi.DeviceId(claim_uid, r.device)};
    if (auto shared = edits.shared_cdi_ids.find(r.device); shared != edits.shared_cdi_ids.end()) {
      d.cdi_device_ids.insert(d.cdi_device_ids.end(), shared->second.begin(), shared->second.end());
    }
    d.share_id = r.share_id;
    out.devices.push_back(std::move(d));
  }
  return out;
}

Engine::Engine(EngineOptions options, ledger::ClaimLedger& ledger, ClaimKind& kind, ClaimSource& claims,
               const cdi::CdiSpecWriter& cdi, metrics::DraMetrics* metrics)
    : options_(std::move(options)),
      driver_(kind.driver_name()),
      ledger_(ledger),
      kind_(kind),
      claims_(claims),
      cdi_(cdi),
      metrics_(metrics),
      op_locks_(ledger.dir()) {
  // The ledger counts prepared devices by type as it applies records, so
  // the gauges cost the number of types per request.
  ledger_.SetDeviceClassifier([&kind](const std::string& device) {
    std::string t = kind.DeviceType(device);
    return t.empty() ? std::string("unknown") : t;
  });
}

Engine::~Engine() { ledger_.SetDeviceClassifier(nullptr); }

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
    NVDRA_INFO("Returning newly prepared devices for claim '{}': {} device(s)", claim.ToString(),
                 out->size());
  } else {
    const Status s = out.status();  // a copy: `out` is replaced next
    out = s.Wrap("error preparing devices for claim " + claim.ToString());
    const std::string& error = out.status().message();
    if (metrics_ != nullptr) metrics_->RecordPrepareError(metrics::kErrorPrepareDevices);
    // The kubelet-facing layer logs the one line of a failed claim.
    if (s.permanent() && options_.on_permanent_failure) options_.on_permanent_failure(claim, error);
  }
  request_timer.reset();
  RefreshGauges();
  return out;
}

void Engine::RecordSteps(bool prepare, const RequestSteps& steps, bool whole_request) {
  if (metrics_ == nullptr) return;
  metrics_->AddRequestSteps(prepare ? metrics::Operation::kPrepare : metrics::Operation::kUnprepare, steps,
                            whole_request);
}

Result<Engine::Devices> Engine::Prepare(const model::ClaimRef& ref, Steady::time_point deadline) {
  bool was_completed = false;
  {
    // A claim this process or another completed in this boot, under this
    // UID and name: the UID pins the object, and its allocation changes only
    // after every consumer is gone (then the kubelet unprepares it, or the
    // reconciler does once the API server shows it deallocated). A repeated
    // Prepare (another pod sharing the claim, a kubelet retry or restart)
    // is answered from the ledger without asking the API server
    // (docs/ledger-format.md, "Repeated Prepare").
    NVDRA_ASSIGN_OR_RETURN(ClaimLock lock, LockClaim(ref.uid, deadline));
    NVDRA_ASSIGN_OR_RETURN(auto recorded, ledger_.Get(ref.uid));
    if (recorded && recorded->state == ledger::ClaimState::kPrepareCompleted && !recorded->from_earlier_boot &&
        !recorded->allocation.empty() && recorded->ns == ref.ns && recorded->name == ref.name &&
        !(recorded->undo.is_object() && recorded->undo.contains("rebuilt")) && MetadataPresent(*recorded)) {
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
    // look under the claim's locks below answers that case.
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
  // Another Prepare of this claim may have completed it while we planned.
  NVDRA_ASSIGN_OR_RETURN(std::optional<Devices> recorded, CompletedThisBoot(work, snap));
  if (recorded) return std::move(*recorded);
  NVDRA_RETURN_IF_ERROR(CheckDeadline(deadline, "recording the claim"));
  NVDRA_ASSIGN_OR_RETURN(ledger::BeginResult begin, Begin(work, plan, snap));
  if (begin.outcome == ledger::BeginOutcome::kAlreadyPrepared) return AlreadyPrepared(begin.entry, &snap);
  if (begin.outcome == ledger::BeginOutcome::kRedoAfterReboot) {
    NVDRA_INFO("Claim {} was prepared before the node rebooted; redoing its node-side work", ref.ToString());
  }
  return PrepareDevices(work, plan, snap, begin.entry.attempt, lock);
}

Result<Engine::ClaimLock> Engine::LockClaim(const std::string& uid, Steady::time_point deadline) {
  TimedStep step(RequestStep::kClaimLock);
  auto in_process = locks_.LockUntil(uid, deadline);
  if (!in_process) return ClaimBusy();
  NVDRA_ASSIGN_OR_RETURN(ledger::ClaimOperationLock across, op_locks_.Acquire(uid, deadline));
  return ClaimLock{std::move(*in_process), std::move(across)};
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
                                r.device + ", request " + r.request + "), not to this node " +
                                options_.node_name + "; it cannot be prepared here")
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
  auto groups =
      config::ResolveConfigs(kind_.ConfigRules(options_.gates), snap.configs, work.results, type_of, options_.gates);
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
  if (options_.metadata != nullptr && options_.gates.Enabled(config::Gate::kDeviceMetadata)) {
    NVDRA_RETURN_IF_ERROR(WriteMetadata(snap, work.results, &output.devices));
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
  ClaimOutput output = BuildClaimOutput(cdi_, entry.uid, entry.allocation, std::move(edits).value(), entry.ns, entry.name);
  if (!output.spec.devices.empty()) {
    NVDRA_RETURN_IF_ERROR(cdi_.WriteClaimSpec(entry.uid, output.spec).Wrap("write CDI spec"));
  }
  // The recorded devices say whether the claim has metadata (the gate may
  // have changed since): the answer stays the recorded one either way.
  const bool has_metadata =
      options_.metadata != nullptr &&
      std::any_of(entry.prepared.begin(), entry.prepared.end(), [this](const model::PreparedDevice& d) {
        return std::any_of(d.cdi_device_ids.begin(), d.cdi_device_ids.end(),
                           [this](const std::string& id) { return options_.metadata->IsDeviceId(id); });
      });
  if (has_metadata && snap != nullptr) NVDRA_RETURN_IF_ERROR(WriteMetadata(*snap, entry.allocation, nullptr));
  NVDRA_VLOG(2, "Prepare of claim {} already completed; returning the recorded devices",
             model::ClaimRef{entry.ns, entry.uid, entry.name}.ToString());
  return entry.prepared;
}

Status Engine::WriteMetadata(const ClaimSnapshot& snap, const std::vector<model::AllocationResult>& results,
                             Devices* devices) const {
  MetadataClaim claim{snap.uid, snap.ns, snap.name, snap.pod_claim_name};
  // Requests in the order of their first result, with their devices.
  std::vector<std::pair<std::string, std::vector<MetadataDevice>>> requests;
  for (const auto& r : results) {
    auto it = std::find_if(requests.begin(), requests.end(), [&](const auto& q) { return q.first == r.request; });
    if (it == requests.end()) it = requests.insert(requests.end(), {r.request, {}});
    it->second.push_back({r.pool, r.device, kind_.MetadataAttributes(r.device)});
  }
  for (const auto& [request, devs] : requests) {
    auto id = options_.metadata->Write(claim, request, devs);
    if (!id.ok()) return id.status().Wrap("unable to write device metadata for request " + request);
    if (devices == nullptr) continue;
    // As upstream: the id goes to the request's first device only; one
    // mount per container is enough.
    const std::string base = BaseRequest(request);
    for (size_t i = 0; i < results.size() && i < devices->size(); ++i) {
      if (BaseRequest(results[i].request) != base) continue;
      auto& ids = (*devices)[i].cdi_device_ids;
      if (std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
      break;
    }
  }
  return Status::Ok();
}

bool Engine::MetadataPresent(const ledger::ClaimEntry& entry) const {
  if (options_.metadata == nullptr) return true;
  const std::string kind_prefix = options_.metadata->driver() + "/metadata=" + entry.uid + "_";
  for (const auto& d : entry.prepared) {
    for (const auto& id : d.cdi_device_ids) {
      if (id.rfind(kind_prefix, 0) != 0) continue;
      const std::string base = id.substr(kind_prefix.size());
      if (!PathExists(options_.metadata->SpecPath(entry.uid, base)) ||
          !PathExists(options_.metadata->FilePath(entry.ns, entry.name, base))) {
        return false;
      }
    }
  }
  return true;
}

Status Engine::RemoveMetadata(const ledger::ClaimEntry& entry) const {
  if (options_.metadata == nullptr) return Status::Ok();
  // An entry rebuilt from a CDI spec or imported from the Go driver's
  // checkpoint may lack its name or allocation: then the directories are
  // searched for the claim's UID.
  if (entry.name.empty() || entry.allocation.empty()) {
    return options_.metadata->RemoveAllOf(entry.uid).Wrap("remove device metadata");
  }
  std::set<std::string> bases;
  for (const auto& a : entry.allocation) bases.insert(BaseRequest(a.request));
  for (const auto& d : entry.prepared) {
    for (const auto& r : d.requests) bases.insert(BaseRequest(r));
  }
  return options_.metadata->Remove(entry.uid, entry.ns, entry.name, bases).Wrap("remove device metadata");
}

int Engine::SweepOrphanMetadata(const std::set<std::string>& live, int* errors) {
  if (options_.metadata == nullptr) return 0;
  std::vector<std::string> stale;
  auto uids = options_.metadata->ListUids(&stale);
  if (!uids.ok()) {
    NVDRA_WARN("reconcile: list device metadata: {}", uids.status().message());
    (*errors)++;
    return 0;
  }
  int removed = 0;
  for (const auto& uid : *uids) {
    if (live.count(uid)) continue;
    // Check and delete as one step against every process, as for the
    // claim's CDI spec: a claim being prepared is not an orphan.
    auto claim_lock = locks_.Lock(uid);
    auto op_lock = op_locks_.TryAcquire(uid);
    if (!op_lock.ok() || !op_lock->has_value()) continue;
    auto entry = ledger_.Get(uid);
    if (!entry.ok() || (entry->has_value() && ledger::HoldsResources((*entry)->state))) continue;
    Status s = options_.metadata->RemoveAllOf(uid);
    if (!s.ok()) {
      NVDRA_WARN("reconcile: remove device metadata of claim {}: {}", uid, s.message());
      (*errors)++;
      continue;
    }
    NVDRA_INFO("removed orphan device metadata of claim {} (no live ledger entry)", uid);
    removed++;
  }
  // A request directory whose file never got written (a crash between its
  // mkdir and the rename), long enough ago that no write is in flight.
  for (const auto& dir : stale) {
    if (!options_.metadata->RemoveRequestDir(dir).ok()) (*errors)++;
  }
  return removed;
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
      const bool rebuilt = h.undo.is_object() && h.undo.contains("rebuilt");
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
  RefreshGauges();
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
  NVDRA_RETURN_IF_ERROR(RemoveMetadata(entry));
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
    NVDRA_INFO("Checkpointed RC cleanup: unprepared stale claim: {}/{} (claim {}: {})", stale.ns, stale.name,
                 stale.uid, why);
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

Result<bool> Engine::RecoverLostClaims() {
  NVDRA_ASSIGN_OR_RETURN(bool missing, ledger_.ClaimsMayBeMissing());
  if (!missing) return true;
  NVDRA_ASSIGN_OR_RETURN(std::vector<std::string> uids, cdi_.ListClaimSpecUids());
  // Specs that name their claim first: when two specs name one device (a
  // spec copied under another UID, a claim deleted and its device given to
  // the next), the one the API server can vouch for wins, and the other is
  // an orphan the sweep removes once the recovery is over.
  std::vector<std::pair<std::string, Result<cdi::CdiSpecWriter::ClaimSpecContents>>> specs;
  for (const auto& uid : uids) specs.emplace_back(uid, cdi_.ReadClaimSpec(uid));
  std::stable_partition(specs.begin(), specs.end(), [](const auto& s) { return s.second.ok() && !s.second->name.empty(); });
  int failed = 0;
  for (const auto& [uid, contents] : specs) {
    Status s = RebuildFromSpec(uid);
    if (!s.ok()) {
      NVDRA_WARN("ledger recovery: claim {}: {}", uid, s.message());
      failed++;
    }
  }
  if (failed > 0) return false;  // the next pass tries again; no spec is swept meanwhile
  NVDRA_RETURN_IF_ERROR(ledger_.FinishRecovery());
  NVDRA_INFO("ledger recovery finished: {} claim spec(s) checked; the ledger is the truth again", uids.size());
  return true;
}

Status Engine::RebuildFromSpec(const std::string& uid) {
  NVDRA_ASSIGN_OR_RETURN(ClaimLock lock, LockClaim(uid, Steady::now() + std::chrono::seconds(10)));
  NVDRA_ASSIGN_OR_RETURN(auto entry, ledger_.Get(uid));
  if (entry && ledger::HoldsResources(entry->state)) return Status::Ok();
  auto spec = cdi_.ReadClaimSpec(uid);
  if (!spec.ok() && spec.status().code() == StatusCode::kNotFound) return Status::Ok();  // removed meanwhile
  if (!spec.ok() && spec.status().code() == StatusCode::kInvalidArgument) {
    // No claim can be read out of it, now or later: it holds nothing, and
    // the sweep removes it once the recovery is over.
    NVDRA_WARN("ledger recovery: skipping claim {}: {}", uid, spec.status().message());
    return Status::Ok();
  }
  NVDRA_RETURN_IF_ERROR(spec.status());
  const std::vector<std::string>& devices = spec->devices;
  if (devices.empty()) return Status::Ok();  // names no device of the claim: nothing it could hold
  ledger::RebuiltClaim c;
  c.uid = uid;
  c.ns = spec->ns;
  c.name = spec->name;
  c.devices = devices;
  for (const auto& d : devices) c.cdi_device_ids.push_back(cdi_.DeviceId(uid, d));
  c.held = ledger::HeldByDevices(&kind_.codec(), devices);
  c.source = "cdi spec";
  Status rebuilt = ledger_.RebuildEntry(c);
  if (rebuilt.code() == StatusCode::kConflict && !c.name.empty()) {
    // Rebuilt before from a spec whose claim the API server no longer has
    // (a copy made under another UID, a deleted claim): that holder goes.
    if (ClearStaleHolders(ledger::RebuiltHeld(c), uid)) rebuilt = ledger_.RebuildEntry(c);
  }
  if (rebuilt.code() == StatusCode::kConflict) {
    // A claim prepared since (or rebuilt before, from a spec that names its
    // claim) holds its device: that one is the truth, and this spec an
    // orphan the sweep removes once the recovery is over.
    NVDRA_WARN("ledger recovery: not rebuilding claim {}: {}", uid, rebuilt.message());
    return Status::Ok();
  }
  NVDRA_RETURN_IF_ERROR(rebuilt);
  if (c.name.empty()) {
    NVDRA_WARN("ledger recovery: rebuilt claim {} from its CDI spec ({} device(s)); the spec does not name the "
               "claim, so the reconciler releases it after the grace period (--completed-claim-grace) unless a "
               "Prepare or Unprepare of it comes first",
               uid, devices.size());
  } else {
    NVDRA_WARN("ledger recovery: rebuilt claim {}/{} ({}) from its CDI spec ({} device(s)); its next Prepare or "
               "Unprepare completes the entry, and the reconciler checks it meanwhile",
               c.ns, c.name, uid, devices.size());
  }
  return Status::Ok();
}

Result<bool> Engine::RemoveOrphanSpec(const std::string& uid) {
  auto claim_lock = locks_.Lock(uid);
  // Check and delete as one step against every process: a claim another
  // operation is working on is not an orphan now (its spec may be the one
  // being written); a later pass looks again.
  auto op_lock = op_locks_.TryAcquire(uid);
  if (!op_lock.ok()) return op_lock.status();
  if (!op_lock->has_value()) return false;
  auto entry = ledger_.Get(uid);
  if (!entry.ok()) return entry.status();
  if (entry->has_value() && ledger::HoldsResources((*entry)->state)) return false;
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-before-orphan-spec-remove"));
  NVDRA_RETURN_IF_ERROR(cdi_.RemoveClaimSpec(uid));
  NVDRA_INFO("removed orphan CDI spec of claim {} (no live ledger entry)", uid);
  return true;
}

int Engine::SweepOrphanSpecs(const std::set<std::string>& live, int* errors) {
  int removed = 0;
  auto uids = cdi_.ListClaimSpecUids();
  if (!uids.ok()) {
    NVDRA_WARN("reconcile: list CDI specs: {}", uids.status().message());
    (*errors)++;
    return 0;
  }
  for (const auto& uid : *uids) {
    if (live.count(uid)) continue;
    auto r = RemoveOrphanSpec(uid);
    if (!r.ok()) {
      (*errors)++;
    } else if (*r) {
      removed++;
    }
  }
  removed += SweepOrphanMetadata(live, errors);
  // Then temp files a crashed write left behind. The ledger records a claim
  // before its spec is written, so a write in flight belongs to a claim the
  // ledger knows (in any state): its files stay. The specs left are those of
  // live claims (or ones that became live since): all known, all kept.
  auto swept = cdi_.SweepOrphanClaimSpecs([this](const std::string& uid) {
    auto e = ledger_.Get(uid);
    return !e.ok() || e->has_value();
  });
  if (!swept.ok()) {
    NVDRA_WARN("reconcile: sweep CDI temp files: {}", swept.status().message());
    (*errors)++;
  } else {
    removed += static_cast<int>(swept->size());
  }
  return removed;
}

void Engine::RefreshGauges() {
  if (metrics_ == nullptr) return;
  TimedStep step(RequestStep::kGauges);
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
