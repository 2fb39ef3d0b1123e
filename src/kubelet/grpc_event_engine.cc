#include "kubelet/grpc_event_engine.h"

#include <chrono>
#include <utility>

namespace nvdra::kubelet {

#if NVDRA_TIMER_EVENT_ENGINE

using grpc_event_engine::experimental::EndpointConfig;
using grpc_event_engine::experimental::EventEngine;
using grpc_event_engine::experimental::MemoryAllocator;
using grpc_event_engine::experimental::MemoryAllocatorFactory;

namespace {

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

TimerEventEngine::TimerEventEngine() : TimerEventEngine(std::make_shared<TimerThread>("grpc-timers")) {}

TimerEventEngine::TimerEventEngine(std::shared_ptr<TimerThread> timers) : timers_(std::move(timers)) {}

TimerEventEngine::~TimerEventEngine() { timers_->CancelAll(this); }

bool TimerEventEngine::IsWorkerThread() { return timers_->IsTimerThread(); }

EventEngine::TaskHandle TimerEventEngine::Schedule(Duration when, absl::AnyInvocable<void()> closure) {
  auto at = TimerThread::Clock::now() + std::chrono::duration_cast<TimerThread::Clock::duration>(when);
  TimerThread::Handle h = timers_->RunAt(at, std::move(closure), this);
  return {{h.id, reinterpret_cast<intptr_t>(timers_.get())}};
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
  if (handle.keys[1] != reinterpret_cast<intptr_t>(timers_.get())) return false;
  return timers_->Cancel({handle.keys[0]});
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

void UseTimerEventEngine(std::shared_ptr<TimerThread> timers) {
  grpc_event_engine::experimental::SetEventEngineFactory([timers]() -> std::unique_ptr<EventEngine> {
    return timers ? std::make_unique<TimerEventEngine>(timers) : std::make_unique<TimerEventEngine>();
  });
}

#else

void UseTimerEventEngine(std::shared_ptr<TimerThread>) {}  // gRPC keeps its stock EventEngine

#endif  // NVDRA_TIMER_EVENT_ENGINE

}  // namespace nvdra::kubelet
