// A flag one thread raises to end another thread's blocking wait at once:
// the waiter registers how to wake itself (stop its event loop, close a
// socket) for as long as it blocks, and Cancel() runs that, so a cancel
// takes effect now rather than at the waiter's next poll. A watch stream
// blocked on the API server ends this way when the plugin stops.
#pragma once

#include <atomic>
#include <functional>
#include <utility>

#include "util/mutex.h"

namespace nvdra {

class CancelFlag {
 public:
  CancelFlag() = default;
  CancelFlag(const CancelFlag&) = delete;
  CancelFlag& operator=(const CancelFlag&) = delete;

  bool cancelled() const { return flag_.load(std::memory_order_acquire); }

  // Sets the flag and wakes the waiter, if one is registered.
  void Cancel() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    flag_.store(true, std::memory_order_release);
    if (wake_) wake_();
  }
  // Clears the flag for a new run of the waiter.
  void Reset() { flag_.store(false, std::memory_order_release); }

  // While the returned guard lives, Cancel() runs `wake` (which must not
  // block, nor call back into this flag); it runs here at once when the
  // flag is already set, and never once the guard is gone. One waiter at a
  // time.
  class Registration {
   public:
    explicit Registration(const CancelFlag* flag) : flag_(flag) {}
    Registration(Registration&& other) noexcept : flag_(std::exchange(other.flag_, nullptr)) {}
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    Registration& operator=(Registration&&) = delete;
    ~Registration() {
      if (flag_ == nullptr) return;
      MutexLock lock(flag_->mu_);
      flag_->wake_ = nullptr;
    }

   private:
    const CancelFlag* flag_;
  };
  [[nodiscard]] Registration OnCancel(std::function<void()> wake) const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    wake_ = std::move(wake);
    if (cancelled()) wake_();
    return Registration(this);
  }

 private:
  mutable Mutex mu_;
  mutable std::function<void()> wake_ GUARDED_BY(mu_);
  std::atomic<bool> flag_{false};
};

}  // namespace nvdra
