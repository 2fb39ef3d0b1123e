#include "kubelet/fake_claim_engine.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

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
  b.delay = std::chrono::milliseconds(j.value("delay_ms", 0));
  b.hold = j.value("hold", false);
  return b;
}

}  // namespace

void FakeClaimEngine::SetDefault(FakeClaimBehavior b) {
  std::lock_guard lock(mu_);
  default_ = std::move(b);
}

void FakeClaimEngine::Set(const std::string& uid, FakeClaimBehavior b) {
  std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
    released_.insert(uid);
  }
  cv_.notify_all();
}

void FakeClaimEngine::CancelAll() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

bool FakeClaimEngine::WaitStarted(const std::string& uid, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return started_.count(uid) > 0; });
}

bool FakeClaimEngine::WaitCompleted(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return completed_.size() >= n; });
}

std::vector<std::string> FakeClaimEngine::Completed() const {
  std::lock_guard lock(mu_);
  return completed_;
}

int FakeClaimEngine::Calls(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = calls_.find(uid);
  return it == calls_.end() ? 0 : it->second;
}

std::set<std::string> FakeClaimEngine::Prepared() const {
  std::lock_guard lock(mu_);
  return prepared_;
}

FakeClaimBehavior FakeClaimEngine::BehaviorFor(const std::string& uid) const {
  auto it = behaviors_.find(uid);
  return it == behaviors_.end() ? default_ : it->second;
}

bool FakeClaimEngine::Pause(const std::string& uid, const FakeClaimBehavior& b,
                            std::unique_lock<std::mutex>& lock) {
  ++calls_[uid];
  started_.insert(uid);
  cv_.notify_all();
  if (b.delay.count() > 0) {
    cv_.wait_for(lock, b.delay, [&] { return cancelled_; });
  }
  if (b.hold) {
    cv_.wait(lock, [&] { return cancelled_ || released_.count(uid) > 0; });
    released_.erase(uid);
  }
  return !cancelled_;
}

PrepareResult FakeClaimEngine::PrepareClaim(const ClaimRef& claim,
                                            std::chrono::steady_clock::time_point) {
  if (on_start_) on_start_("prepare", claim);
  std::unique_lock lock(mu_);
  FakeClaimBehavior b = BehaviorFor(claim.uid);
  PrepareResult r;
  if (!Pause(claim.uid, b, lock)) {
    r.error = "fake engine cancelled";
  } else if (!b.prepare_error.empty()) {
    r.error = b.prepare_error;
  } else {
    r.devices = b.devices;
    prepared_.insert(claim.uid);
  }
  completed_.push_back("prepare:" + claim.uid);
  cv_.notify_all();
  return r;
}

std::string FakeClaimEngine::UnprepareClaim(const ClaimRef& claim,
                                            std::chrono::steady_clock::time_point) {
  if (on_start_) on_start_("unprepare", claim);
  std::unique_lock lock(mu_);
  FakeClaimBehavior b = BehaviorFor(claim.uid);
  std::string err;
  if (!Pause(claim.uid, b, lock)) {
    err = "fake engine cancelled";
  } else if (!b.unprepare_error.empty()) {
    err = b.unprepare_error;
  } else {
    prepared_.erase(claim.uid);  // unknown claims simply succeed
  }
  completed_.push_back("unprepare:" + claim.uid);
  cv_.notify_all();
  return err;
}

}  // namespace nvdra::kubelet
