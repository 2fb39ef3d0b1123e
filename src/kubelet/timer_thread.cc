#include "kubelet/timer_thread.h"

#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "util/mutex.h"
#include "util/thread_name.h"

namespace nvdra::kubelet {

struct TimerThread::State {
  struct Task {
    absl::AnyInvocable<void()> fn;
    const void* owner;
    std::multimap<Clock::time_point, intptr_t>::iterator due;
  };
  void Loop() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  intptr_t next_id_ GUARDED_BY(mu_) = 1;
  // Tasks by id, and their ids by due time (ties in the order scheduled);
  // each task keeps its place in `due_`, so a cancel takes no scan.
  std::map<intptr_t, Task> tasks_ GUARDED_BY(mu_);
  std::multimap<Clock::time_point, intptr_t> due_ GUARDED_BY(mu_);
  std::thread thread_;
};

TimerThread::TimerThread(const char* name) : state_(std::make_shared<State>()) {
  state_->thread_ = std::thread([s = state_, name] {
    SetThreadName(name);
    s->Loop();
  });
}

TimerThread::~TimerThread() {
  State& s = *state_;
  {
    MutexLock l(s.mu_);
    s.stop_ = true;
  }
  s.cv_.NotifyAll();
  if (s.thread_.get_id() == std::this_thread::get_id()) {
    s.thread_.detach();  // destroyed by its own closure: the thread ends after it
  } else {
    s.thread_.join();
  }
  std::map<intptr_t, State::Task> dropped;
  {
    MutexLock l(s.mu_);
    dropped.swap(s.tasks_);
    s.due_.clear();
  }
}

bool TimerThread::IsTimerThread() const { return state_->thread_.get_id() == std::this_thread::get_id(); }

void TimerThread::State::Loop() {
  MutexLock l(mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.Wait(mu_);
      continue;
    }
    auto first = due_.begin();
    if (first->first > Clock::now()) {
      cv_.WaitUntil(mu_, first->first);
      continue;
    }
    auto task = tasks_.find(first->second);
    absl::AnyInvocable<void()> fn = std::move(task->second.fn);
    tasks_.erase(task);
    due_.erase(first);
    l.Unlock();
    fn();
    fn = nullptr;  // what the closure holds goes before the lock is taken again
    l.Lock();
  }
}

TimerThread::Handle TimerThread::RunAt(Clock::time_point at, absl::AnyInvocable<void()> fn, const void* owner) {
  State& s = *state_;
  Handle handle;
  {
    MutexLock l(s.mu_);
    intptr_t id = s.next_id_++;
    auto place = s.due_.emplace(at, id);
    s.tasks_.emplace(id, State::Task{std::move(fn), owner, place});
    handle.id = id;
  }
  s.cv_.NotifyAll();
  return handle;
}

bool TimerThread::Cancel(Handle handle) {
  State& s = *state_;
  absl::AnyInvocable<void()> dropped;
  MutexLock l(s.mu_);
  auto task = s.tasks_.find(handle.id);
  if (task == s.tasks_.end()) return false;  // ran, is running, or was cancelled
  s.due_.erase(task->second.due);
  dropped = std::move(task->second.fn);
  s.tasks_.erase(task);
  l.Unlock();
  return true;  // `dropped` goes here, outside the lock
}

void TimerThread::CancelAll(const void* owner) {
  State& s = *state_;
  std::vector<absl::AnyInvocable<void()>> dropped;
  MutexLock l(s.mu_);
  for (auto it = s.tasks_.begin(); it != s.tasks_.end();) {
    if (it->second.owner != owner) {
      ++it;
      continue;
    }
    s.due_.erase(it->second.due);
    dropped.push_back(std::move(it->second.fn));
    it = s.tasks_.erase(it);
  }
  l.Unlock();
}

}  // namespace nvdra::kubelet
