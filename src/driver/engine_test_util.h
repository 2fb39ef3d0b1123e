// Test doubles for the engine: an in-memory ClaimSource and a scripted
// device kind. The ledger and the CDI writer in engine tests are the real
// ones, on a temporary directory.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "cdi/container_edits.h"
#include "config/config_kind.h"
#include "driver/claim_source.h"
#include "driver/device_kind.h"
#include "ledger/claim_ledger.h"
#include "util/file_util.h"
#include "util/mutex.h"

namespace nvdra::driver::testing {

// The driver, deadline and claim reference the engine tests share.
inline constexpr const char* kDriver = "gpu.nvidia.com";
inline const auto kFar = std::chrono::steady_clock::now() + std::chrono::hours(1);
inline model::ClaimRef Ref(const ClaimSnapshot& c) { return {c.ns, c.uid, c.name}; }

class FakeClaimSource final : public ClaimSource {
 public:
  Result<ClaimSnapshot> Get(const std::string& ns, const std::string& name) override EXCLUDES(mu_) {
    MutexLock l(mu_);
    gets_++;
    if (!error_.ok()) return error_;
    auto it = claims_.find(ns + "/" + name);
    if (it == claims_.end()) return NotFound("resourceclaims \"" + name + "\" not found");
    return it->second;
  }
  void Put(ClaimSnapshot c) {
    MutexLock l(mu_);
    claims_[c.ns + "/" + c.name] = std::move(c);
  }
  void Remove(const std::string& ns, const std::string& name) {
    MutexLock l(mu_);
    claims_.erase(ns + "/" + name);
  }
  void FailWith(Status s) {
    MutexLock l(mu_);
    error_ = std::move(s);
  }
  int gets() const {
    MutexLock l(mu_);
    return gets_;
  }

 private:
  mutable Mutex mu_;
  std::map<std::string, ClaimSnapshot> claims_ GUARDED_BY(mu_);
  Status error_ GUARDED_BY(mu_);
  int gets_ GUARDED_BY(mu_) = 0;
};

// A real ledger in <dir>/plugin, whose boot id ("boot-1") is <dir>/boot_id;
// `codec` (not owned) words its refusals, as the plugin's kind does.
inline Result<std::unique_ptr<ledger::ClaimLedger>> OpenTestLedger(const std::string& dir,
                                                                   const ledger::KindCodec* codec = nullptr) {
  NVDRA_RETURN_IF_ERROR(MakeDirectories(dir + "/plugin"));
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(dir + "/boot_id", "boot-1\n"));
  ledger::LedgerOptions lo;
  lo.dir = dir + "/plugin";
  lo.boot_id_path = dir + "/boot_id";
  lo.codec = codec;
  return ledger::ClaimLedger::Open(lo);
}

// Stores claim c-<uid> of namespace default as the API server shows it once
// the scheduler allocated `device` of `driver` on node-1 (request "r") and
// reserved it for pod-<uid>; returns its reference.
inline model::ClaimRef PutReservedClaim(FakeClaimSource& claims, const std::string& uid, const std::string& driver,
                                        const std::string& device) {
  ClaimSnapshot c;
  c.uid = uid;
  c.ns = "default";
  c.name = "c-" + uid;
  c.allocated = true;
  c.results = {{"r", driver, "node-1", device, false, ""}};
  c.consumers = {"pod-" + uid};
  claims.Put(c);
  return model::ClaimRef{"default", uid, "c-" + uid};
}

// Devices hold themselves; nothing can be described to the Go driver.
class FakeCodec final : public ledger::KindCodec {
 public:
  explicit FakeCodec(std::string driver) : driver_(std::move(driver)) {}
  std::string driver_name() const override { return driver_; }
  std::vector<std::string> HeldResources(const std::string& device,
                                         const std::vector<nlohmann::json>& /*config_parameters*/) const override {
    return {device};
  }
  std::optional<std::string> UpstreamPreparedDevices(const ledger::ClaimEntry& /*e*/) const override {
    return std::nullopt;
  }

 private:
  std::string driver_;
};

// The config kind of FakeKind's devices: strictly decoded, no fields of its
// own, nothing to default or check.
struct FakeConfig {
  static const config::ConfigKind& Kind() {
    static const config::ConfigKind kind = config::DefineConfigKind<FakeConfig>({
        .api_version = std::string(config::kApiVersion),
        .kind = "FakeConfig",
        .driver = kDriver,
        .decode = [](config::ConfigWalker& w, const config::JsonValue& root,
                     FakeConfig&) { w.Struct(root, "FakeConfig", config::fields::TypeMetaFields(w)); },
    });
    return kind;
  }
  friend bool operator==(const FakeConfig&, const FakeConfig&) = default;
};

// Devices "gpu-0".."gpu-7" of type "gpu". Records what it prepared and undid.
class FakeKind final : public DeviceKind {
 public:
  explicit FakeKind(std::string driver = "gpu.nvidia.com") : driver_(driver), codec_(std::move(driver)) {
    EXPECT_TRUE(config::RegisterConfigKind(FakeConfig::Kind()).ok());
  }
  const ledger::KindCodec& codec() const override { return codec_; }

  std::string driver_name() const override { return driver_; }
  std::string DeviceType(const std::string& device) const override {
    for (int i = 0; i < 8; i++) {
      if (device == "gpu-" + std::to_string(i)) return "gpu";
    }
    return "";
  }
  config::DriverConfigRules ConfigRules(const config::FeatureGates&) const override {
    return {driver_, {{"gpu", "FakeConfig"}}, {FakeConfig{}}, ""};
  }
  std::vector<std::string> MetricDeviceTypes() const override { return {"gpu", "unknown"}; }
  std::vector<model::PublishedDevice> PublishedDevices() const override { return {}; }
  Result<ClaimPlan> Plan(const ClaimWork& work) override {
    ClaimPlan p;
    std::set<std::string> names;
    for (const auto& r : work.results) names.insert(r.device);
    p.undo = {{"devices", std::vector<std::string>(names.begin(), names.end())}};
    return p;
  }
  Status CheckReady(const ClaimWork&, const ClaimPlan&) override {
    ready_checks++;
    return not_ready;
  }
  bool MayWaitUntilReady(const ClaimWork&, const ClaimPlan&) const override { return may_wait; }
  Result<PreparedClaim> Prepare(const ClaimWork& work, const ClaimPlan& plan) override {
    prepares++;
    if (!fail_prepare.ok()) return fail_prepare;
    PreparedClaim out;
    out.undo = plan.undo;
    out.undo["prepared"] = true;
    out.await_ready = await_ready;
    NVDRA_ASSIGN_OR_RETURN(out.edits, Edits(out.undo, {}));
    return out;
  }
  Result<ClaimEdits> Edits(const nlohmann::json& undo, const std::vector<std::string>&) override {
    ClaimEdits out;
    for (const auto& n : undo["devices"].get<std::vector<std::string>>()) {
      cdi::ContainerEdits e;
      e.env = {"FAKE_DEVICE=" + n + env_suffix};
      out.devices.push_back({n, e});
    }
    return out;
  }
  Status AwaitReady(const ClaimWork&, const nlohmann::json&) override {
    awaits++;
    return on_await ? on_await() : Status::Ok();
  }
  Status Unprepare(const std::string& claim_uid, const nlohmann::json&) override {
    MutexLock l(mu_);
    unprepared.push_back(claim_uid);
    return fail_unprepare;
  }

  std::map<std::string, model::AttributeValue> MetadataAttributes(const std::string& device) const override {
    auto it = metadata_attributes.find(device);
    return it == metadata_attributes.end() ? std::map<std::string, model::AttributeValue>{} : it->second;
  }

  std::atomic<int> prepares{0};
  // Appended to each device's env: what the edits of a kind rebuilt on
  // another driver would change.
  std::string env_suffix;
  // What MetadataAttributes answers, by device.
  std::map<std::string, std::map<std::string, model::AttributeValue>> metadata_attributes;
  std::atomic<int> ready_checks{0};
  Status not_ready;       // what CheckReady returns
  bool may_wait = false;  // what MayWaitUntilReady answers
  Status fail_prepare;
  Status fail_unprepare;
  bool await_ready = false;          // Prepare asks for AwaitReady
  std::function<Status()> on_await;  // what AwaitReady does (unset: ready)
  std::atomic<int> awaits{0};
  Mutex mu_;  // Unprepare may run on several engine threads
  // Written under mu_; tests read it once the engine calls have returned.
  std::vector<std::string> unprepared;

 private:
  std::string driver_;
  FakeCodec codec_;
};

}  // namespace nvdra::driver::testing
