#include "util/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "util/log.h"
#include "util/parse_number.h"

namespace nvdra {

FailPoints& FailPoints::Process() {
  static FailPoints* instance = [] {
    auto* fp = new FailPoints();
    if (const char* env = std::getenv("NVDRA_FAILPOINTS"); env != nullptr && *env != '\0') {
      Status s = fp->Load(env);
      if (!s.ok()) {
        // A mistyped failpoint spec must not silently test nothing.
        fprintf(stderr, "nvdra: invalid NVDRA_FAILPOINTS: %s\n", s.message().c_str());
        std::_Exit(2);
      }
    }
    return fp;
  }();
  return *instance;
}

static std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status FailPoints::Load(std::string_view spec) {
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find_first_of(";,", pos);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view item = Trim(spec.substr(pos, end - pos));
    pos = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgument("failpoint \"" + std::string(item) + "\": expected name=action");
    }
    std::string name(Trim(item.substr(0, eq)));
    std::string_view act = Trim(item.substr(eq + 1));
    Action a;
    if (size_t star = act.find('*'); star != std::string_view::npos) {
      std::string n(act.substr(star + 1));
      Result<int32_t> v = ParseInt32(n);
      if (!v.ok() || *v < 1) {
        return InvalidArgument("failpoint " + name + ": bad hit number \"" + n + "\"");
      }
      a.on_hit = *v;
      act = act.substr(0, star);
    }
    if (act == "crash") {
      a.kind = Kind::kCrash;
    } else if (act == "error") {
      a.kind = Kind::kError;
    } else if (act == "pass") {
      a.kind = Kind::kPass;
    } else if (act == "off") {
      a.kind = Kind::kOff;
    } else if (act.starts_with("delay(") && act.ends_with(")")) {
      std::string n(act.substr(6, act.size() - 7));
      Result<int32_t> v = ParseInt32(n);
      if (!v.ok() || *v < 0) {
        return InvalidArgument("failpoint " + name + ": bad delay \"" + n + "\"");
      }
      a.kind = Kind::kDelay;
      a.delay_ms = *v;
    } else {
      return InvalidArgument("failpoint " + name + ": unknown action \"" + std::string(act) +
                             "\" (want crash, error, delay(MS), pass or off)");
    }
    Set(name, a);
    if (end == spec.size()) break;
  }
  return Status::Ok();
}

void FailPoints::Set(const std::string& name, Action action) {
  MutexLock l(mu_);
  if (action.kind == Kind::kOff) {
    actions_.erase(name);
  } else {
    actions_[name] = action;
  }
  any_armed_.store(!actions_.empty());
}

void FailPoints::Clear() {
  MutexLock l(mu_);
  actions_.clear();
  hits_.clear();
  any_armed_.store(false);
}

Status FailPoints::Hit(std::string_view name) {
  Action a;
  {
    MutexLock l(mu_);
    // Found before inserting: no string is made for a point reached again.
    auto hit = hits_.find(name);
    if (hit == hits_.end()) hit = hits_.emplace(std::string(name), 0).first;
    int n = ++hit->second;
    if (!any_armed_.load()) return Status::Ok();
    auto it = actions_.find(name);
    if (it == actions_.end()) return Status::Ok();
    a = it->second;
    if (a.on_hit != 0 && a.on_hit != n) return Status::Ok();
  }
  switch (a.kind) {
    case Kind::kCrash:
      // Exactly what kill -9 does: no cleanup, no buffered output flushed.
      kill(getpid(), SIGKILL);
      std::_Exit(137);
    case Kind::kError: return Internal("failpoint " + std::string(name) + " fired");
    case Kind::kDelay:
      // Said in the log, so an end-to-end test can tell that a process has
      // reached the point and is inside the widened window.
      NVDRA_INFO("failpoint {}: delaying {} ms", name, a.delay_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(a.delay_ms));
      return Status::Ok();
    case Kind::kPass:
    case Kind::kOff: break;
  }
  return Status::Ok();
}

bool FailPoints::Armed(std::string_view name) const {
  if (!any_armed_.load()) return false;
  MutexLock l(mu_);
  return actions_.find(name) != actions_.end();
}

int FailPoints::HitCount(std::string_view name) const {
  MutexLock l(mu_);
  auto it = hits_.find(name);
  return it == hits_.end() ? 0 : it->second;
}

}  // namespace nvdra
