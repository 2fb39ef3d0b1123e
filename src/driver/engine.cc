#include "driver/engine.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "util/failpoint.h"
#include "util/log.h"

namespace nvdra::driver {

namespace {

using Steady = std::chrono::steady_clock;

double SecondsSince(Steady::time_point t0) {
  return std::chrono::duration<double>(Steady::now() - t0).count();
}

std::string RefString(const std::string& ns, const std::string& name, const std::string& uid) {
  return ns + "/" + name + ":" + uid;
}

Status CheckDeadline(Steady::time_point deadline, const std::string& step) {
  if (Steady::now() >= deadline) {
    return DeadlineExceeded("deadline passed before " + step + "; the kubelet will retry");
  }
  return Status::Ok();
}

}  // namespace

std::vector<kubelet::PreparedDevice> ToKubeletDevices(const std::vector<ledger::PreparedDevice>& devices) {
  std::vector<kubelet::PreparedDevice> out;
  out.reserve(devices.size());
  for (const auto& d : devices) {
    kubelet::PreparedDevice k;
    k.request_names = d.requests;
    k.pool = d.pool;
    k.device = d.device;
    k.cdi_device_ids = d.cdi_device_ids;
    if (!d.share_id.empty()) k.share_id = d.share_id;
    out.push_back(std::move(k));
  }
  return out;
}

Engine::Engine(EngineOptions options, ledger::ClaimLedger& ledger, DeviceKind& kind, ClaimSource& claims,
               const cdi::CdiSpecWriter& cdi, metrics::DraMetrics* metrics)
    : options_(std::move(options)),
      ledger_(ledger),
      kind_(kind),
      claims_(claims),
      cdi_(cdi),
      metrics_(metrics),
      op_locks_(ledger.dir()) {}

kubelet::PrepareResult Engine::PrepareClaim(const kubelet::ClaimRef& claim, Steady::time_point deadline) {
  auto t0 = Steady::now();
  std::optional<metrics::DraMetrics::InflightScope> inflight;
  if (metrics_ != nullptr) inflight.emplace(*metrics_, metrics::Operation::kPrepare);
  kubelet::PrepareResult out;
  bool permanent = false;
  auto devices = Prepare(claim, deadline, &permanent);
  if (devices.ok()) {
    out.devices = std::move(devices).value();
    if (metrics_ != nullptr) metrics_->ObservePrepare(SecondsSince(t0), true);
    spdlog::info("Returning newly prepared devices for claim '{}': {} device(s)", claim.ToString(),
                 out.devices.size());
  } else {
    out.error = "error preparing devices for claim " + claim.ToString() + ": " + devices.status().message();
    if (metrics_ != nullptr) {
      metrics_->ObservePrepare(SecondsSince(t0), false);
      metrics_->RecordPrepareError(metrics::kErrorPrepareDevices);
    }
    if (permanent) {
      spdlog::error("Permanent error preparing devices for claim {}: {}", claim.uid, devices.status().message());
      if (options_.on_permanent_failure) options_.on_permanent_failure(claim, out.error);
    } else {
      spdlog::warn("{}", out.error);
    }
  }
  RefreshGauges();
  return out;
}

Result<std::vector<kubelet::PreparedDevice>> Engine::Prepare(const kubelet::ClaimRef& ref,
                                                             Steady::time_point deadline, bool* permanent) {
  auto claim_lock = locks_.LockUntil(ref.uid, deadline);
  if (!claim_lock) return DeadlineExceeded("another operation on this claim is still running; the kubelet will retry");

  // 1. The claim as the API server has it now.
  auto step = Steady::now();
  auto snap = claims_.GetUntil(ref.ns, ref.name, deadline);
  if (metrics_ != nullptr) metrics_->ObservePrepareStep(metrics::PrepareStep::kFetchClaim, SecondsSince(step));
  if (!snap.ok()) {
    return snap.status().Wrap("retrieve claim " + ref.ns + "/" + ref.name);
  }
  if (snap->uid != ref.uid) {
    return FailedPrecondition("claim " + ref.ns + "/" + ref.name + " got replaced (the API server has UID " +
                              snap->uid + ", the kubelet asked for " + ref.uid + ")");
  }
  if (!snap->allocated) return FailedPrecondition("claim " + ref.ns + "/" + ref.name + " not allocated");

  // 2. Our results only.
  ClaimWork work{ref.uid, ref.ns, ref.name, {}, {}};
  std::vector<config::AllocationResultRef> refs;
  for (const auto& r : snap->results) {
    if (r.driver != options_.driver) continue;
    std::string type = kind_.DeviceType(r.device);
    if (type.empty()) {
      *permanent = true;
      return NotFound("requested device " + r.device + " (request " + r.request +
                      ") is not allocatable on this node: it is not among the devices this plugin publishes");
    }
    work.results.push_back(r);
    refs.push_back({r.request, r.device, type, r.driver});
  }
  if (work.results.empty()) return std::vector<kubelet::PreparedDevice>{};

  std::vector<ledger::AllocatedDevice> allocation;
  for (const auto& r : work.results) {
    allocation.push_back({r.request, r.driver, r.pool, r.device, r.admin_access, r.share_id});
  }
  // From here to the end no other process may work on this claim: its
  // unprepare would otherwise undo devices between our device work and our
  // CDI write, leaving a spec or a sharing setting nobody removes.
  auto op_lock = op_locks_.Acquire(ref.uid, deadline);
  if (!op_lock.ok()) return op_lock.status();
  // A claim completed in this boot answers from the ledger before its configs
  // and the kind's readiness gate are checked again: a repeated Prepare must
  // return the recorded devices even when, say, the ComputeDomain's daemon is
  // restarting or a feature gate changed since.
  auto recorded = ledger_.Get(ref.uid);
  if (!recorded.ok()) return recorded.status();
  if (recorded->has_value() && (*recorded)->state == ledger::ClaimState::kPrepareCompleted &&
      !(*recorded)->from_earlier_boot && ledger::SameAllocation((*recorded)->allocation, allocation)) {
    return AlreadyPrepared(ref, **recorded);
  }

  // 3. Configs, validated before anything durable happens.
  auto groups = config::ResolveConfigs(options_.driver, snap->configs, refs, options_.gates);
  if (!groups.ok()) {
    *permanent = true;
    return groups.status();
  }
  work.groups = std::move(groups).value();

  auto plan = kind_.Plan(work);
  if (!plan.ok()) {
    *permanent = !plan.status().retryable();
    return plan.status();
  }
  NVDRA_RETURN_IF_ERROR(kind_.CheckReady(work, *plan));
  NVDRA_RETURN_IF_ERROR(CheckDeadline(deadline, "recording the claim"));

  // 4. PrepareStarted, durably, before any device is touched.
  ledger::BeginPrepareRequest req;
  req.uid = ref.uid;
  req.ns = ref.ns;
  req.name = ref.name;
  req.allocation = allocation;
  if (!plan->held.empty()) req.held = plan->held;
  req.undo = plan->undo;
  req.consumers = snap->consumers;
  step = Steady::now();
  auto begin = ledger_.BeginPrepare(req);
  if (!begin.ok() && begin.status().code() == StatusCode::kConflict) {
    std::vector<std::string> held = req.held ? *req.held : ledger::DefaultHeld(req.allocation);
    if (ClearStaleHolders(held, ref.uid)) begin = ledger_.BeginPrepare(req);
  }
  if (metrics_ != nullptr) metrics_->ObservePrepareStep(metrics::PrepareStep::kLedgerBegin, SecondsSince(step));
  if (!begin.ok()) return begin.status();

  const ledger::ClaimEntry& entry = begin->entry;
  if (begin->outcome == ledger::BeginOutcome::kAlreadyPrepared) return AlreadyPrepared(ref, entry);

  // 5. The device work.
  nlohmann::json previous = begin->outcome == ledger::BeginOutcome::kStarted ? nlohmann::json() : entry.undo;
  if (begin->outcome == ledger::BeginOutcome::kRedoAfterReboot) {
    spdlog::info("Claim {} was prepared before the node rebooted; redoing its node-side work", ref.ToString());
  }
  step = Steady::now();
  auto prepared = kind_.Prepare(work, *plan, previous);
  if (metrics_ != nullptr) metrics_->ObservePrepareStep(metrics::PrepareStep::kDevicePrepare, SecondsSince(step));
  if (!prepared.ok()) return prepared.status();
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-device-prepare"));

  // 6. The CDI spec, atomically.
  step = Steady::now();
  if (!prepared->spec.devices.empty()) {
    NVDRA_RETURN_IF_ERROR(cdi_.WriteClaimSpec(ref.uid, prepared->spec).Wrap("unable to create CDI spec file for claim"));
  }
  if (metrics_ != nullptr) metrics_->ObservePrepareStep(metrics::PrepareStep::kCdiWrite, SecondsSince(step));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-cdi-write"));

  // 7. PrepareCompleted.
  step = Steady::now();
  std::vector<ledger::PreparedDevice> devices = prepared->devices;
  NVDRA_RETURN_IF_ERROR(ledger_.CompletePrepare(ref.uid, std::move(devices), prepared->undo, entry.attempt));
  if (metrics_ != nullptr) metrics_->ObservePrepareStep(metrics::PrepareStep::kLedgerComplete, SecondsSince(step));
  return ToKubeletDevices(prepared->devices);
}

Result<std::vector<kubelet::PreparedDevice>> Engine::AlreadyPrepared(const kubelet::ClaimRef& ref,
                                                                     const ledger::ClaimEntry& entry) {
  // Idempotent: same devices, nothing durable changes; only re-ensure the
  // CDI spec (tmpfs may have lost it).
  auto spec = kind_.RebuildSpec(entry);
  if (!spec.ok()) return spec.status().Wrap("rebuild CDI spec");
  if (!spec->devices.empty()) NVDRA_RETURN_IF_ERROR(cdi_.WriteClaimSpec(ref.uid, *spec).Wrap("write CDI spec"));
  NVDRA_VLOG(2, "Prepare of claim {} already completed; returning the recorded devices", ref.ToString());
  return ToKubeletDevices(entry.prepared);
}

bool Engine::ClearStaleHolders(const std::vector<std::string>& held, const std::string& self_uid) {
  std::set<std::string> checked;
  bool freed = false;
  for (const auto& resource : held) {
    auto holder = ledger_.HolderOf(resource);
    if (!holder.ok() || !holder->has_value()) continue;
    const ledger::ClaimEntry& h = **holder;
    if (h.uid == self_uid || !checked.insert(h.uid).second) continue;
    if (h.state != ledger::ClaimState::kPrepareStarted) continue;
    if (h.name.empty()) continue;
    auto current = claims_.Get(h.ns, h.name);
    bool gone = (!current.ok() && current.status().code() == StatusCode::kNotFound) ||
                (current.ok() && current->uid != h.uid);
    if (!gone) continue;
    Status s = UnprepareEntry(h, "its ResourceClaim is gone and another claim needs " + resource);
    if (s.ok()) freed = true;
  }
  return freed;
}

std::string Engine::UnprepareClaim(const kubelet::ClaimRef& claim, Steady::time_point deadline) {
  auto t0 = Steady::now();
  std::optional<metrics::DraMetrics::InflightScope> inflight;
  if (metrics_ != nullptr) inflight.emplace(*metrics_, metrics::Operation::kUnprepare);
  Status s = Unprepare(claim, deadline);
  if (metrics_ != nullptr) {
    metrics_->ObserveUnprepare(SecondsSince(t0), s.ok());
    if (!s.ok()) metrics_->RecordUnprepareError(metrics::kErrorUnprepareDevices);
  }
  RefreshGauges();
  if (s.ok()) return "";
  std::string msg = "error unpreparing devices for claim " + claim.ToString() + ": " + s.message();
  spdlog::warn("{}", msg);
  return msg;
}

Status Engine::Unprepare(const kubelet::ClaimRef& ref, Steady::time_point deadline) {
  auto claim_lock = locks_.LockUntil(ref.uid, deadline);
  if (!claim_lock) return DeadlineExceeded("another operation on this claim is still running; the kubelet will retry");
  auto op_lock = op_locks_.Acquire(ref.uid, deadline);
  if (!op_lock.ok()) return op_lock.status();
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
  NVDRA_RETURN_IF_ERROR(kind_.Unprepare(entry));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-after-device-unprepare"));
  NVDRA_RETURN_IF_ERROR(cdi_.RemoveClaimSpec(entry.uid).Wrap("remove CDI spec"));
  return ledger_.FinishUnprepare(entry.uid);
}

Status Engine::UnprepareEntry(const ledger::ClaimEntry& stale, const std::string& why) {
  // Bounded: the caller may hold another claim's lock (a conflict check).
  auto bound = Steady::now() + std::chrono::seconds(10);
  auto claim_lock = locks_.LockUntil(stale.uid, bound);
  if (!claim_lock) return DeadlineExceeded("claim " + stale.uid + " is busy; will retry");
  auto op_lock = op_locks_.Acquire(stale.uid, bound);
  if (!op_lock.ok()) return op_lock.status();
  auto entry = ledger_.BeginUnprepare(stale.uid);
  if (!entry.ok()) return entry.status();
  if (!entry->has_value()) return Status::Ok();
  Status s = UnprepareLocked(**entry);
  std::string ref = RefString(stale.ns, stale.name, stale.uid);
  if (s.ok()) {
    spdlog::info("unprepared stale claim {} ({})", ref, why);
  } else {
    spdlog::warn("unprepare of stale claim {} failed, will retry: {}", ref, s.message());
  }
  return s;
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
  spdlog::info("removed orphan CDI spec of claim {} (no live ledger entry)", uid);
  return true;
}

void Engine::RefreshGauges() {
  if (metrics_ == nullptr) return;
  auto entries = ledger_.List();
  if (!entries.ok()) return;
  std::map<std::string, int64_t> devices, states;
  for (const auto& e : *entries) {
    states[ledger::ClaimStateName(e.state)]++;
    if (e.state != ledger::ClaimState::kPrepareCompleted) continue;
    for (const auto& d : e.prepared) {
      std::string t = kind_.DeviceType(d.device);
      devices[t.empty() ? "unknown" : t]++;
    }
  }
  metrics_->SetPreparedDeviceCounts(devices);
  metrics_->SetLedgerClaimCounts(states);
  struct stat st;
  if (::stat(ledger_.log_path().c_str(), &st) == 0) metrics_->SetLedgerBytes(static_cast<double>(st.st_size));
}

}  // namespace nvdra::driver
