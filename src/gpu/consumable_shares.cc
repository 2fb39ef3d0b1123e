#include "gpu/consumable_shares.h"

#include <fmt/format.h>

#include "config/opaque_config.h"
#include "config/quantity.h"
#include "util/parse_number.h"

namespace nvdra::gpu {

namespace {

constexpr int64_t kMemoryStep = 1024 * 1024;  // 1Mi: upstream's granularity

// The group of `work` the result of `device` for `request` is in.
const config::ConfigGroup* GroupOf(const driver::ClaimWork& work, const model::AllocationResult& r) {
  for (const auto& g : work.groups) {
    for (const auto& gr : g.results) {
      if (gr.request == r.request && gr.device == r.device) return &g;
    }
  }
  return nullptr;
}

Result<std::map<std::string, int64_t>> Amounts(const std::map<std::string, std::string>& quantities,
                                               const std::string& what) {
  std::map<std::string, int64_t> out;
  for (const auto& [name, text] : quantities) {
    auto q = config::Quantity::Parse(text);
    if (!q.ok()) return InvalidArgument(fmt::format("{} {}: \"{}\": {}", what, name, text, q.status().message()));
    out[name] = q->value();
  }
  return out;
}

// Each amount of one result's share within what the device admits: not
// negative, and at least the minimum of the capacity's request policy; zero
// only where that minimum is zero (the memory of modes unlimited and N). A
// capacity without a policy is consumed whole by the scheduler, so zero is
// refused there too unless the device publishes zero of it. Whether the
// amounts fit the capacity, alone or beside other shares, the ledger decides
// (ledger::CheckHeldAgainstOthers).
Status CheckShareRange(const std::string& uid, const ledger::HeldShare& share, const model::PublishedDevice& d) {
  for (const auto& [name, amount] : share.consumed) {
    if (amount < 0) {
      return InvalidArgument(fmt::format("requested device {}: claim {} consumes {} {}, a negative amount",
                                         share.resource, uid, name, amount));
    }
    auto cap = share.capacity.find(name);
    int64_t min = cap != share.capacity.end() && cap->second == 0 ? 0 : 1;
    if (auto p = d.capacity_policies.find(name); p != d.capacity_policies.end() && !p->second.min.empty()) {
      auto q = config::Quantity::Parse(p->second.min);
      if (q.ok()) min = q->value();
    }
    if (amount < min) {
      return InvalidArgument(fmt::format(
          "requested device {}: claim {} consumes {} {}, below the least share of it the device admits ({})",
          share.resource, uid, name, amount, min));
    }
  }
  return Status::Ok();
}

}  // namespace

DeviceSharedWithOthers SharedWithOthersIn(const driver::ClaimsView& claims) {
  return [&claims](const std::string& device, const std::string& claim_uid) {
    return claims.SharedWithOthers(device, claim_uid);
  };
}

Result<ConsumableShares> ParseConsumableShares(std::string_view flag, const config::FeatureGates& gates) {
  if (flag != "disabled" && !gates.Enabled(config::Gate::kConsumableShares)) {
    return InvalidArgument(fmt::format("--consumable-shares requires feature gate {} to be enabled",
                                       config::FeatureGates::Name(config::Gate::kConsumableShares)));
  }
  ConsumableShares out;
  if (flag == "disabled") return out;
  if (flag == "memory") {
    out.mode = ConsumableSharesMode::kMemory;
  } else if (flag == "unlimited") {
    out.mode = ConsumableSharesMode::kUnlimited;
  } else {
    auto n = ParseInt64(flag);
    if (!n.ok() || *n <= 0) {
      return InvalidArgument(fmt::format(
          "invalid value for --consumable-shares: \"{}\" (must be 'disabled', 'memory', 'unlimited', or a positive "
          "integer)",
          flag));
    }
    out.mode = ConsumableSharesMode::kCount;
    out.count = *n;
  }
  return out;
}

void ApplyConsumableShares(model::PublishedDevice& d, const ConsumableShares& shares) {
  if (!shares.enabled()) return;
  d.allow_multiple_allocations = true;
  auto memory = d.capacity.find("memory");
  if (memory == d.capacity.end()) return;
  auto bytes = config::Quantity::Parse(memory->second);
  // A published value always parses; a device without one is left unshared
  // by capacity, as upstream leaves a device without memory.
  if (!bytes.ok()) return;
  // The API server requires max and default to be multiples of step.
  const std::string max = config::FormatBinarySI(bytes->value() / kMemoryStep * kMemoryStep);
  const std::string step = config::FormatBinarySI(kMemoryStep);
  memory->second = max;
  if (shares.mode == ConsumableSharesMode::kMemory) {
    d.capacity_policies["memory"] = {max, step, max, step};
    return;
  }
  d.capacity_policies["memory"] = {"0", "0", max, step};
  if (shares.mode == ConsumableSharesMode::kCount) {
    const std::string count = config::FormatDecimalSI(shares.count);
    d.capacity["shares"] = count;
    d.capacity_policies["shares"] = {"1", "1", count, "1"};
  }
}

Result<std::vector<ledger::HeldShare>> PlanShares(
    const driver::ClaimWork& work, const std::function<const model::PublishedDevice*(const std::string&)>& published) {
  std::vector<ledger::HeldShare> out;
  for (const auto& r : work.results) {
    if (r.share_id.empty() || r.admin_access) continue;
    const model::PublishedDevice* d = published(r.device);
    if (d == nullptr || !d->allow_multiple_allocations) continue;
    ledger::HeldShare s;
    s.resource = r.device;
    s.share_id = r.share_id;
    const std::string what = fmt::format("allocation result of request {} on device {}: consumedCapacity", r.request,
                                         r.device);
    NVDRA_ASSIGN_OR_RETURN(s.consumed, Amounts(r.consumed_capacity, what));
    NVDRA_ASSIGN_OR_RETURN(s.capacity, Amounts(d->capacity, "published capacity of device " + r.device));
    NVDRA_RETURN_IF_ERROR(CheckShareRange(work.uid, s, *d));
    const config::ConfigGroup* g = GroupOf(work, r);
    s.sharing = g == nullptr ? "" : config::ToCanonicalJson(g->config);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace nvdra::gpu
