// The EventEngine the plugins give gRPC: one thread (a TimerThread, which
// the plugin's own timers share) that runs gRPC's closures and timers in
// order of their time. gRPC 1.51 serves and dials
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

#include "kubelet/timer_thread.h"

namespace nvdra::kubelet {

#if NVDRA_TIMER_EVENT_ENGINE

class TimerEventEngine final : public grpc_event_engine::experimental::EventEngine {
 public:
  // On a thread of its own.
  TimerEventEngine();
  // On `timers`, which other engines and the plugin's own timers may share.
  explicit TimerEventEngine(std::shared_ptr<TimerThread> timers);
  // Drops its closures still waiting, as gRPC expects of an engine it no
  // longer holds (and stops its thread, when it has one of its own).
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

 private:
  TaskHandle Schedule(Duration when, absl::AnyInvocable<void()> closure);
  std::shared_ptr<TimerThread> timers_;
};

#endif  // NVDRA_TIMER_EVENT_ENGINE

// Makes every EventEngine gRPC creates from now on a TimerEventEngine, on
// `timers` when given (else each on a thread of its own). Call before the
// first gRPC object. Does nothing on a gRPC it is not pinned to.
void UseTimerEventEngine(std::shared_ptr<TimerThread> timers = nullptr);

}  // namespace nvdra::kubelet
