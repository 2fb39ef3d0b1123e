#include "kubelet/fake_claim_engine.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace nvdra::kubelet {
namespace {

FakeClaimBehavior ParseBehavior(const nlohmann::json& j) {
  FakeClaimBehavior b;
  const nlohmann::json devices = j.value("devices", nlohmann::json::array());
  for (const auto& d : devices) {
    PreparedDevice pd;
    pd.requests = d.value("request_names", std::vector<std::string>{});
    pd.pool = d.value("pool", "");
    pd.device = d.value("device", "");
    pd.cdi_device_ids = d.value("cdi_device_ids", std::vector<std::string>{});
    if (d.contains("share_id")) pd.share_id = d.at("share_id").get<std::string>();
    b.devices.push_back(std::move(pd));
  }
  b.prepare_error = j.value("prepare_error", "");
  b.unprepare_error = j.value("unprepare_error", "");
  b.throw_message = j.value("throw", "");
  b.delay = std::chrono::milliseconds(j.value("delay_ms", 0));
  b.hold = j.value("hold", false);
  return b;
}

}  // namespace

void FakeClaimEngine::SetDefault(FakeClaimBehavior b) {
  MutexLock lock(mu_);
  default_ = std::move(b);
}

void FakeClaimEngine::Set(const std::string& uid, FakeClaimBehavior b) {
  MutexLock lock(mu_);
  behaviors_[uid] = std::move(b);
}

Status FakeClaimEngine::LoadScript(const std::string& json_text) {
  try {
    auto j = nlohmann::json::parse(json_text);
    if (j.contains("default")) SetDefault(ParseBehavior(j.at("default")));
    const nlohmann::json claims = j.value("claims", nlohmann::json::object());
    for (const auto& [uid, b] : claims.items()) {
      Set(uid, ParseBehavior(b));
    }
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("fake engine script is not valid: {}", e.what()));
  }
  return Status::Ok();
}

void FakeClaimEngine::SetOnStart(std::function<void(const std::string&, const ClaimRef&)> f) {
  on_start_ = std::move(f);
}

void FakeClaimEngine::Release(const std::string& uid) {
  {
    MutexLock lock(mu_);
    released_.insert(uid);
  }
  cv_.NotifyAll();
}

void FakeClaimEngine::CancelAll() {
  {
    MutexLock lock(mu_);
    cancelled_ = true;
  }
  cv_.NotifyAll();
}

bool FakeClaimEngine::WaitStarted(const std::string& uid, std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  return cv_.WaitFor(mu_, timeout, [&]() REQUIRES(mu_) { return started_.count(uid) > 0; });
}

bool FakeClaimEngine::WaitCompleted(size_t n, std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  return cv_.WaitFor(mu_, timeout, [&]() REQUIRES(mu_) { return completed_.size() >= n; });
}

std::vector<std::string> FakeClaimEngine::Completed() const {
  MutexLock lock(mu_);
  return completed_;
}

int FakeClaimEngine::Calls(const std::string& uid) const {
  MutexLock lock(mu_);
  auto it = calls_.find(uid);
  return it == calls_.end() ? 0 : it->second;
}

std::set<std::string> FakeClaimEngine::Prepared() const {
  MutexLock lock(mu_);
  return prepared_;
}

FakeClaimBehavior FakeClaimEngine::BehaviorFor(const std::string& uid) const {
  auto it = behaviors_.find(uid);
  return it == behaviors_.end() ? default_ : it->second;
}

bool FakeClaimEngine::Pause(const std::string& uid, const FakeClaimBehavior& b) {
  ++calls_[uid];
  started_.insert(uid);
  cv_.NotifyAll();
  if (b.delay.count() > 0) {
    cv_.WaitFor(mu_, b.delay, [&]() REQUIRES(mu_) { return cancelled_; });
  }
  if (b.hold) {
    cv_.Wait(mu_, [&]() REQUIRES(mu_) { return cancelled_ || released_.count(uid) > 0; });
    released_.erase(uid);
  }
  return !cancelled_;
}

PrepareOutcome FakeClaimEngine::PrepareClaim(const ClaimRef& claim, std::chrono::steady_clock::time_point) {
  if (on_start_) on_start_("prepare", claim);
  MutexLock lock(mu_);
  FakeClaimBehavior b = BehaviorFor(claim.uid);
  const bool cancelled = !Pause(claim.uid, b);
  completed_.push_back("prepare:" + claim.uid);
  cv_.NotifyAll();
  if (cancelled) return Unavailable("fake engine cancelled");
  if (!b.throw_message.empty()) throw std::runtime_error(b.throw_message);  // the scoped lock unlocks
  if (!b.prepare_error.empty()) return Internal(b.prepare_error);
  prepared_.insert(claim.uid);
  return b.devices;
}

Status FakeClaimEngine::UnprepareClaim(const ClaimRef& claim, std::chrono::steady_clock::time_point) {
  if (on_start_) on_start_("unprepare", claim);
  MutexLock lock(mu_);
  FakeClaimBehavior b = BehaviorFor(claim.uid);
  const bool cancelled = !Pause(claim.uid, b);
  completed_.push_back("unprepare:" + claim.uid);
  cv_.NotifyAll();
  if (cancelled) return Unavailable("fake engine cancelled");
  if (!b.throw_message.empty()) throw std::runtime_error(b.throw_message);
  if (!b.unprepare_error.empty()) return Internal(b.unprepare_error);
  prepared_.erase(claim.uid);  // unknown claims simply succeed
  return Status::Ok();
}

}  // namespace nvdra::kubelet
