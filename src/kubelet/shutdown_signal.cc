#include "kubelet/shutdown_signal.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <cerrno>

namespace nvdra::kubelet {
namespace {

sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void ShutdownSignal::Block() {
  sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int ShutdownSignal::Wait() {
  sigset_t set = ShutdownSet();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

std::unique_ptr<ShutdownWatch> ShutdownWatch::Start() {
  auto watch = std::make_unique<ShutdownWatch>();
  watch->thread_ = std::thread([w = watch.get()] { w->Run(); });
  return watch;
}

ShutdownWatch::~ShutdownWatch() { StopTaking(); }

int ShutdownWatch::StopTaking() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  return signal();
}

// A signal is taken the instant it arrives; the timeout only bounds how long
// the destructor waits for this thread to notice it should end.
void ShutdownWatch::Run() {
  const sigset_t set = ShutdownSet();
  const timespec tick{0, 100 * 1000 * 1000};
  for (;;) {
    {
      MutexLock lock(mu_);
      if (stopping_ || signal_ != 0) return;
    }
    int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig > 0) {
      Request(sig);
      return;
    }
  }
}

void ShutdownWatch::Request(int sig) {
  {
    MutexLock lock(mu_);
    if (signal_ == 0) signal_ = sig;
  }
  cv_.NotifyAll();
}

int ShutdownWatch::signal() const {
  MutexLock lock(mu_);
  return signal_;
}

bool ShutdownWatch::WaitFor(std::chrono::milliseconds d) {
  MutexLock lock(mu_);
  return cv_.WaitFor(mu_, d, [&]() REQUIRES(mu_) { return signal_ != 0; });
}

int ShutdownWatch::Wait() {
  MutexLock lock(mu_);
  cv_.Wait(mu_, [&]() REQUIRES(mu_) { return signal_ != 0; });
  return signal_;
}

}  // namespace nvdra::kubelet
