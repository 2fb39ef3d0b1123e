// One thread that runs closures at their time, in order of their time: the
// plugin's only timer. gRPC's closures and timers (through the
// TimerEventEngine of grpc_event_engine.h) and the DRA calls' deadlines
// (dra_service.cc) share it, so a call's deadline costs no thread of its own
// and no thread of gRPC's executor.
#pragma once

#include <absl/functional/any_invocable.h>

#include <chrono>
#include <cstdint>
#include <memory>

namespace nvdra::kubelet {

class TimerThread {
 public:
  using Clock = std::chrono::steady_clock;
  struct Handle {
    intptr_t id = 0;
  };

  // Starts the thread, named `name` (15 characters at most).
  explicit TimerThread(const char* name = "timers");
  // Stops the thread; closures still waiting are dropped (outside the lock:
  // their captures may call back in). Safe from a closure of its own (the
  // thread then ends after it).
  ~TimerThread();
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  // Runs `fn` on the thread at `at` (at once when it has passed). `owner`
  // only tags the closure for CancelAll.
  Handle RunAt(Clock::time_point at, absl::AnyInvocable<void()> fn, const void* owner = nullptr);
  // True when the closure had not started and now never will.
  bool Cancel(Handle handle);
  // Drops every waiting closure tagged `owner`.
  void CancelAll(const void* owner);
  bool IsTimerThread() const;

 private:
  // What the thread uses: shared with it, so a TimerThread destroyed by one
  // of its own closures leaves the thread something valid to finish with.
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace nvdra::kubelet
