// The EventEngine the plugins give gRPC: one thread that runs gRPC's
// closures and timers in order of their time. gRPC 1.51 serves and dials
// through its older I/O layer and uses an EventEngine only for closures and
// timers (idle and max-age filters, promise sleeps), yet its default engine
// keeps a pool of at least two threads, and one per core on a larger node.
// Listening, connecting and name lookups are not served here: they fail
// with UNIMPLEMENTED, which no path of gRPC 1.51's Unix-socket and TCP
// servers and channels reaches.
//
// Pinned to gRPC 1.51 (cmake/NvdraDeps.cmake): the experimental interface
// changes between releases, so with another gRPC the build sets
// NVDRA_TIMER_EVENT_ENGINE to 0, leaves the class out and
// UseTimerEventEngine() keeps gRPC's stock engine. Revisit this file then.
#pragma once

#ifndef NVDRA_TIMER_EVENT_ENGINE
#define NVDRA_TIMER_EVENT_ENGINE 1
#endif

#if NVDRA_TIMER_EVENT_ENGINE
#include <grpc/event_engine/event_engine.h>
#endif

#include <memory>

namespace nvdra::kubelet {

#if NVDRA_TIMER_EVENT_ENGINE

class TimerEventEngine final : public grpc_event_engine::experimental::EventEngine {
 public:
  TimerEventEngine();
  // Stops the thread; closures still waiting are dropped, as gRPC expects
  // of an engine it no longer holds.
  ~TimerEventEngine() override;

  bool IsWorkerThread() override;
  void Run(Closure* closure) override;
  void Run(absl::AnyInvocable<void()> closure) override;
  TaskHandle RunAfter(Duration when, Closure* closure) override;
  TaskHandle RunAfter(Duration when, absl::AnyInvocable<void()> closure) override;
  // True when the task had not started and now never will.
  bool Cancel(TaskHandle handle) override;

  absl::StatusOr<std::unique_ptr<Listener>> CreateListener(
      Listener::AcceptCallback on_accept, absl::AnyInvocable<void(absl::Status)> on_shutdown,
      const grpc_event_engine::experimental::EndpointConfig& config,
      std::unique_ptr<grpc_event_engine::experimental::MemoryAllocatorFactory> memory_allocator_factory) override;
  ConnectionHandle Connect(OnConnectCallback on_connect, const ResolvedAddress& addr,
                           const grpc_event_engine::experimental::EndpointConfig& args,
                           grpc_event_engine::experimental::MemoryAllocator memory_allocator,
                           Duration timeout) override;
  bool CancelConnect(ConnectionHandle handle) override;
  std::unique_ptr<DNSResolver> GetDNSResolver(const DNSResolver::ResolverOptions& options) override;

  struct State;

 private:
  TaskHandle Schedule(Duration when, absl::AnyInvocable<void()> closure);
  std::shared_ptr<State> state_;
};

#endif  // NVDRA_TIMER_EVENT_ENGINE

// Makes every EventEngine gRPC creates from now on a TimerEventEngine. Call
// before the first gRPC object. Does nothing on a gRPC it is not pinned to.
void UseTimerEventEngine();

}  // namespace nvdra::kubelet
