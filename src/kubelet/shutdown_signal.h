// SIGTERM/SIGINT handling without signal handlers: the signals are blocked
// in every thread (call Block() before any thread starts, gRPC's included)
// and one thread waits for them synchronously, so shutdown runs as ordinary
// code (stop servers, remove our sockets) rather than in a handler.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "util/mutex.h"

namespace nvdra::kubelet {

class ShutdownSignal {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and in threads it starts later.
  static void Block();
  // Waits for one of them; returns its number.
  static int Wait();
};

// A shutdown request that waits can be cut short by: startup's retries wait
// on it instead of sleeping, so a signal that arrives while the plugin is
// still starting (discovery retrying for minutes) ends the process at once.
// Start() takes the signals Block() set aside on a thread of its own; a
// watch built directly only sees Request() (tests).
class ShutdownWatch {
 public:
  ShutdownWatch() = default;
  ~ShutdownWatch();  // ends the signal thread, if any
  ShutdownWatch(const ShutdownWatch&) = delete;
  ShutdownWatch& operator=(const ShutdownWatch&) = delete;

  // A watch fed by SIGTERM, SIGINT and SIGHUP. Call after Block(); the
  // first such signal is taken by this watch (ShutdownSignal::Wait() no
  // longer sees it).
  static std::unique_ptr<ShutdownWatch> Start();

  // As if signal `sig` had arrived: every wait returns now and later ones
  // at once. The first request's signal is kept.
  void Request(int sig) EXCLUDES(mu_);
  // The signal that requested shutdown; 0 while none has.
  int signal() const EXCLUDES(mu_);
  // Waits up to `d`; true when shutdown was requested (before or meanwhile).
  bool WaitFor(std::chrono::milliseconds d) EXCLUDES(mu_);
  // Waits until shutdown is requested; returns the signal.
  int Wait() EXCLUDES(mu_);
  // Ends the signal thread (it wakes every 100 ms) once nothing waits on the
  // watch any more; a signal it has not taken stays pending for
  // ShutdownSignal::Wait(). Then returns the signal it took, or 0.
  int StopTaking() EXCLUDES(mu_);

 private:
  void Run() EXCLUDES(mu_);

  mutable Mutex mu_;
  CondVar cv_;
  int signal_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace nvdra::kubelet
