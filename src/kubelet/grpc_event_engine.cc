#include "kubelet/grpc_event_engine.h"

#include <chrono>
#include <map>
#include <thread>
#include <utility>

#include "util/mutex.h"
#include "util/thread_name.h"

namespace nvdra::kubelet {

#if NVDRA_TIMER_EVENT_ENGINE

using grpc_event_engine::experimental::EndpointConfig;
using grpc_event_engine::experimental::EventEngine;
using grpc_event_engine::experimental::MemoryAllocator;
using grpc_event_engine::experimental::MemoryAllocatorFactory;

// What the thread uses: shared with it, so an engine released by one of its
// own closures (gRPC drops its last reference wherever it likes) leaves the
// thread something valid to finish with.
struct TimerEventEngine::State {
  using Clock = std::chrono::steady_clock;
  Mutex mu;
  CondVar cv;
  bool stop GUARDED_BY(mu) = false;
  intptr_t next_id GUARDED_BY(mu) = 1;
  // Tasks by id, and their ids by due time (ties in the order scheduled);
  // each task keeps its place in `due`, so a cancel takes no scan.
  struct Task {
    absl::AnyInvocable<void()> fn;
    std::multimap<Clock::time_point, intptr_t>::iterator due;
  };
  std::map<intptr_t, Task> tasks GUARDED_BY(mu);
  std::multimap<Clock::time_point, intptr_t> due GUARDED_BY(mu);
  std::thread thread;

  void Loop() EXCLUDES(mu) {
    MutexLock l(mu);
    while (!stop) {
      if (due.empty()) {
        cv.Wait(mu);
        continue;
      }
      auto first = due.begin();
      if (first->first > Clock::now()) {
        cv.WaitUntil(mu, first->first);
        continue;
      }
      auto task = tasks.find(first->second);
      absl::AnyInvocable<void()> fn = std::move(task->second.fn);
      tasks.erase(task);
      due.erase(first);
      l.Unlock();
      fn();
      fn = nullptr;  // what the closure holds goes before the lock is taken again
      l.Lock();
    }
  }
};

namespace {
thread_local const TimerEventEngine::State* current_engine = nullptr;

// The stand-in for name lookups: every lookup fails, on the engine's thread.
class NoDnsResolver final : public EventEngine::DNSResolver {
 public:
  explicit NoDnsResolver(EventEngine* engine) : engine_(engine) {}
  LookupTaskHandle LookupHostname(LookupHostnameCallback on_resolve, absl::string_view, absl::string_view,
                                  EventEngine::Duration) override {
    engine_->Run([cb = std::move(on_resolve)]() mutable { cb(Unimplemented()); });
    return {{0, 0}};
  }
  LookupTaskHandle LookupSRV(LookupSRVCallback on_resolve, absl::string_view, EventEngine::Duration) override {
    engine_->Run([cb = std::move(on_resolve)]() mutable { cb(Unimplemented()); });
    return {{0, 0}};
  }
  LookupTaskHandle LookupTXT(LookupTXTCallback on_resolve, absl::string_view, EventEngine::Duration) override {
    engine_->Run([cb = std::move(on_resolve)]() mutable { cb(Unimplemented()); });
    return {{0, 0}};
  }
  bool CancelLookup(LookupTaskHandle) override { return false; }

 private:
  static absl::Status Unimplemented() {
    return absl::UnimplementedError("name lookups through the EventEngine are not served by nvdra");
  }
  EventEngine* engine_;
};
}  // namespace

TimerEventEngine::TimerEventEngine() : state_(std::make_shared<State>()) {
  state_->thread = std::thread([s = state_] {
    SetThreadName("grpc-timers");
    current_engine = s.get();
    s->Loop();
  });
}

TimerEventEngine::~TimerEventEngine() {
  {
    MutexLock l(state_->mu);
    state_->stop = true;
  }
  state_->cv.NotifyAll();
  if (state_->thread.get_id() == std::this_thread::get_id()) {
    state_->thread.detach();  // released by its own closure: the thread ends after it
  } else {
    state_->thread.join();
  }
  // Dropped outside the lock: a closure's captures may call back in.
  std::map<intptr_t, State::Task> dropped;
  {
    MutexLock l(state_->mu);
    dropped.swap(state_->tasks);
    state_->due.clear();
  }
}

bool TimerEventEngine::IsWorkerThread() { return current_engine == state_.get(); }

EventEngine::TaskHandle TimerEventEngine::Schedule(Duration when, absl::AnyInvocable<void()> closure) {
  TaskHandle handle;
  {
    MutexLock l(state_->mu);
    intptr_t id = state_->next_id++;
    auto at = state_->due.emplace(State::Clock::now() + std::chrono::duration_cast<State::Clock::duration>(when), id);
    state_->tasks.emplace(id, State::Task{std::move(closure), at});
    handle = {{id, reinterpret_cast<intptr_t>(state_.get())}};
  }
  state_->cv.NotifyAll();
  return handle;
}

void TimerEventEngine::Run(Closure* closure) {
  Schedule(Duration::zero(), [closure] { closure->Run(); });
}

void TimerEventEngine::Run(absl::AnyInvocable<void()> closure) { Schedule(Duration::zero(), std::move(closure)); }

EventEngine::TaskHandle TimerEventEngine::RunAfter(Duration when, Closure* closure) {
  return Schedule(when, [closure] { closure->Run(); });
}

EventEngine::TaskHandle TimerEventEngine::RunAfter(Duration when, absl::AnyInvocable<void()> closure) {
  return Schedule(when, std::move(closure));
}

bool TimerEventEngine::Cancel(TaskHandle handle) {
  if (handle.keys[1] != reinterpret_cast<intptr_t>(state_.get())) return false;
  absl::AnyInvocable<void()> dropped;
  MutexLock l(state_->mu);
  auto task = state_->tasks.find(handle.keys[0]);
  if (task == state_->tasks.end()) return false;  // ran, is running, or was cancelled
  state_->due.erase(task->second.due);
  dropped = std::move(task->second.fn);
  state_->tasks.erase(task);
  l.Unlock();
  return true;  // `dropped` goes here, outside the lock
}

absl::StatusOr<std::unique_ptr<EventEngine::Listener>> TimerEventEngine::CreateListener(
    Listener::AcceptCallback, absl::AnyInvocable<void(absl::Status)>, const EndpointConfig&,
    std::unique_ptr<MemoryAllocatorFactory>) {
  return absl::UnimplementedError("listening through the EventEngine is not served by nvdra");
}

EventEngine::ConnectionHandle TimerEventEngine::Connect(OnConnectCallback on_connect, const ResolvedAddress&,
                                                        const EndpointConfig&, MemoryAllocator, Duration) {
  Run([cb = std::move(on_connect)]() mutable {
    cb(absl::UnimplementedError("connecting through the EventEngine is not served by nvdra"));
  });
  return {{0, 0}};
}

bool TimerEventEngine::CancelConnect(ConnectionHandle) { return false; }

std::unique_ptr<EventEngine::DNSResolver> TimerEventEngine::GetDNSResolver(const DNSResolver::ResolverOptions&) {
  return std::make_unique<NoDnsResolver>(this);
}

void UseTimerEventEngine() {
  grpc_event_engine::experimental::SetEventEngineFactory(
      []() -> std::unique_ptr<EventEngine> { return std::make_unique<TimerEventEngine>(); });
}

#else

void UseTimerEventEngine() {}  // gRPC keeps its stock EventEngine

#endif  // NVDRA_TIMER_EVENT_ENGINE

}  // namespace nvdra::kubelet
