#include "gpu/time_slice_resets.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "util/file_util.h"
#include "util/json_depth.h"
#include "util/log.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

std::string AttemptKey(const std::string& claim_uid, const std::string& uuid) { return claim_uid + "/" + uuid; }

devices::DeviceHealthEvent OwesReset(const std::string& device, const std::string& uuid) {
  return {device, devices::HealthState::kUnhealthy, std::nullopt,
          "the time-slice reset of GPU " + uuid + " keeps failing; retrying in the background"};
}

}  // namespace

TimeSliceResets::TimeSliceResets(devices::GpuControl& control, TimeSliceResetOptions options)
    : control_(control), options_(std::move(options)) {
  Load();
}

Mutex& TimeSliceResets::LockOf(const std::string& uuid) {
  MutexLock l(mu_);
  auto& m = gpu_locks_[uuid];
  if (!m) m = std::make_unique<Mutex>();
  return *m;
}

Status TimeSliceResets::Apply(const std::string& device, const std::string& uuid, int interval) {
  bool was_owed = false;
  {
    MutexLock gpu(LockOf(uuid));
    NVDRA_RETURN_IF_ERROR(control_.SetComputeMode(uuid, "DEFAULT"));
    NVDRA_RETURN_IF_ERROR(control_.SetTimeSlice(uuid, interval));
    MutexLock l(mu_);
    was_owed = ClearOwedLocked(uuid);
  }
  if (was_owed) {
    NVDRA_INFO("GPU {} ({}): a new claim set its time slice; it no longer owes a reset", device, uuid);
    Report({device, devices::HealthState::kHealthy, std::nullopt, "time slice set by a new claim"});
  }
  return Status::Ok();
}

Status TimeSliceResets::ResetForClaim(const std::string& claim_uid, const std::string& device,
                                      const std::string& uuid) {
  const std::string key = AttemptKey(claim_uid, uuid);
  Status s;
  bool was_owed = false, gave_up = false;
  int failures = 0;
  {
    MutexLock gpu(LockOf(uuid));
    s = control_.SetTimeSlice(uuid, 0);
    MutexLock l(mu_);
    if (s.ok()) {
      bool changed = attempts_.erase(key) > 0;
      was_owed = ClearOwedLocked(uuid);
      if (changed || was_owed) SaveLocked();
    } else {
      failures = ++attempts_[key];
      if (failures >= options_.max_attempts) {
        attempts_.erase(key);
        gave_up = owed_.emplace(uuid, device).second;  // false: it already owed one
      }
      SaveLocked();
    }
  }
  if (s.ok()) {
    if (was_owed) Report({device, devices::HealthState::kHealthy, std::nullopt, "time slice reset"});
    return s;
  }
  if (failures < options_.max_attempts) {
    return s.Wrap("reset time-slice of " + uuid + " (attempt " + std::to_string(failures) + " of " +
                  std::to_string(options_.max_attempts) + "; after the last one the claim is released and " + device +
                  " is marked unhealthy until a reset succeeds)");
  }
  NVDRA_ERROR("claim {}: the time-slice reset of {} ({}) failed {} times; releasing the claim and marking the "
              "GPU unhealthy until a reset succeeds: {}",
              claim_uid, device, uuid, failures, s.message());
  if (gave_up) Report(OwesReset(device, uuid));
  return Status::Ok();
}

Status TimeSliceResets::RetryOwed() {
  std::map<std::string, std::string> owed;
  {
    MutexLock l(mu_);
    owed = owed_;
  }
  Status first;
  for (const auto& [uuid, device] : owed) {
    Status s;
    bool cleared = false;
    {
      MutexLock gpu(LockOf(uuid));
      {
        MutexLock l(mu_);
        if (owed_.count(uuid) == 0) continue;  // a Prepare set it meanwhile
      }
      s = control_.SetTimeSlice(uuid, 0);
      if (s.ok()) {
        MutexLock l(mu_);
        cleared = ClearOwedLocked(uuid);
      }
    }
    if (!s.ok()) {
      NVDRA_WARN("GPU {} ({}) still owes a time-slice reset: {}", device, uuid, s.message());
      if (first.ok()) first = s;
      continue;
    }
    if (cleared) {
      NVDRA_INFO("GPU {} ({}): the owed time-slice reset succeeded; the GPU is healthy again", device, uuid);
      Report({device, devices::HealthState::kHealthy, std::nullopt, "time slice reset"});
    }
  }
  return first;
}

bool TimeSliceResets::ClearOwedLocked(const std::string& uuid) {
  if (owed_.erase(uuid) == 0) return false;
  SaveLocked();
  return true;
}

std::vector<model::PublishedDevice> TimeSliceResets::Decorate(std::vector<model::PublishedDevice> devices) const {
  MutexLock l(mu_);
  for (const auto& [uuid, device] : owed_) {
    for (auto& d : devices) {
      if (d.name == device) d.taints.push_back(model::DeviceTaint{kTimeSliceResetTaintKey, "", "NoSchedule"});
    }
  }
  return devices;
}

std::vector<std::string> TimeSliceResets::OwingDevices() const {
  MutexLock l(mu_);
  std::vector<std::string> out;
  for (const auto& [uuid, device] : owed_) out.push_back(device);
  return out;
}

void TimeSliceResets::SetReporter(devices::HealthCallback report) {
  MutexLock l(report_mu_);
  report_ = std::move(report);
}

void TimeSliceResets::Report(const devices::DeviceHealthEvent& event) {
  MutexLock l(report_mu_);
  if (report_) report_(event);
}

void TimeSliceResets::Load() {
  if (options_.state_path.empty() || !PathExists(options_.state_path)) return;
  auto text = ReadFileToString(options_.state_path);
  Status bad = text.ok() ? CheckJsonDepth(*text, options_.state_path) : text.status();
  json j;
  if (bad.ok()) {
    j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) bad = InvalidArgument("not a JSON object");
  }
  if (!bad.ok()) {
    NVDRA_ERROR("time-slice reset state {} is unreadable and is ignored (GPUs that owed a reset are not "
                "marked unhealthy): {}",
                options_.state_path, bad.message());
    return;
  }
  MutexLock l(mu_);
  if (auto it = j.find("attempts"); it != j.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) {
      if (v.is_number_integer() && v.get<int64_t>() > 0) {
        attempts_[k] = static_cast<int>(std::min<int64_t>(v.get<int64_t>(), options_.max_attempts));
      }
    }
  }
  if (auto it = j.find("owed"); it != j.end() && it->is_object()) {
    for (const auto& [uuid, device] : it->items()) {
      if (device.is_string()) owed_[uuid] = device.get<std::string>();
    }
  }
}

void TimeSliceResets::SaveLocked() {
  if (options_.state_path.empty()) return;
  json j = {{"version", 1}, {"attempts", attempts_}, {"owed", owed_}};
  Status s = WriteFileAtomically(options_.state_path, j.dump() + "\n", 0600);
  if (!s.ok()) NVDRA_ERROR("cannot save time-slice reset state: {}", s.message());
}

}  // namespace nvdra::gpu
