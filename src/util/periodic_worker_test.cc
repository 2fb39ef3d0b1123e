// PeriodicWorker: when runs happen (period, retry period, jitter, triggers)
// with a clock moved by hand, and how Stop ends a wait or a run in progress.
#include "util/periodic_worker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

namespace nvdra {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// Holds the work inside a run until the test opens it.
class Gate {
 public:
  void Pass() EXCLUDES(mu_) {
    MutexLock l(mu_);
    ++entered_;
    cv_.NotifyAll();
    cv_.Wait(mu_, [&]() REQUIRES(mu_) { return open_; });
  }
  bool WaitEntered(int n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    return cv_.WaitFor(mu_, 30s, [&]() REQUIRES(mu_) { return entered_ >= n; });
  }
  void Open() EXCLUDES(mu_) {
    {
      MutexLock l(mu_);
      open_ = true;
    }
    cv_.NotifyAll();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int entered_ GUARDED_BY(mu_) = 0;
  bool open_ GUARDED_BY(mu_) = false;
};

// Work that records the clock's time at the start of each run.
class RecordingWork {
 public:
  explicit RecordingWork(const Clock& clock) : clock_(clock) {}
  PeriodicWorker::Work Fn() {
    return [this]() -> Status {
      MutexLock l(mu_);
      at_.push_back(clock_.SteadyNow());
      return fail_ ? Unavailable("injected") : Status::Ok();
    };
  }
  void SetFail(bool fail) EXCLUDES(mu_) {
    MutexLock l(mu_);
    fail_ = fail;
  }
  std::vector<steady::time_point> at() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return at_;
  }

 private:
  const Clock& clock_;
  Mutex mu_;
  std::vector<steady::time_point> at_ GUARDED_BY(mu_);
  bool fail_ GUARDED_BY(mu_) = false;
};

PeriodicWorkerOptions Options(const Clock& clock, std::chrono::milliseconds period) {
  PeriodicWorkerOptions o;
  o.period = period;
  o.clock = &clock;
  return o;
}

TEST(PeriodicWorkerTest, RunsAtStartThenOncePerPeriod) {
  FakeClock clock;
  RecordingWork work(clock);
  PeriodicWorker w(Options(clock, 10s), work.Fn());
  const steady::time_point t0 = clock.SteadyNow();
  w.Start();
  ASSERT_TRUE(w.WaitForRuns(1, 30s));
  EXPECT_EQ(w.next_run(), t0 + 10s);
  // Not due yet: a wake-up re-reads the clock but does not run.
  clock.Advance(9s);
  w.Wake();
  clock.Advance(1s);
  w.Wake();
  ASSERT_TRUE(w.WaitForRuns(2, 30s));
  EXPECT_EQ(w.next_run(), t0 + 20s);
  clock.Advance(10s);
  w.Wake();
  ASSERT_TRUE(w.WaitForRuns(3, 30s));
  w.Stop();
  EXPECT_EQ(work.at(), (std::vector<steady::time_point>{t0, t0 + 10s, t0 + 20s}));
}

TEST(PeriodicWorkerTest, ThrowingWorkIsAFailedRunAndTheLoopGoesOn) {
  FakeClock clock;
  std::atomic<int> calls{0};
  PeriodicWorkerOptions o = Options(clock, 30s);
  o.retry_period = 5s;
  o.name = "the test loop";
  PeriodicWorker w(o, [&]() -> Status {
    if (calls.fetch_add(1) == 0) throw std::runtime_error("bug in the work");
    return Status::Ok();
  });
  const steady::time_point t0 = clock.SteadyNow();
  w.Start();
  ASSERT_TRUE(w.WaitForRuns(1, 30s));
  // The thrown run counted as a failure: the retry period, not the period.
  EXPECT_EQ(w.next_run(), t0 + 5s);
  clock.Advance(5s);
  w.Wake();
  ASSERT_TRUE(w.WaitForRuns(2, 30s));
  w.Stop();
  EXPECT_EQ(calls.load(), 2);
}

TEST(PeriodicWorkerTest, FirstRunAfterOnePeriodWhenAskedTo) {
  FakeClock clock;
  RecordingWork work(clock);
  PeriodicWorkerOptions o = Options(clock, 5s);
  o.run_at_start = false;
  PeriodicWorker w(o, work.Fn());
  const steady::time_point t0 = clock.SteadyNow();
  w.Start();
  EXPECT_EQ(w.next_run(), t0 + 5s);
  clock.Advance(5s);
  w.Wake();
  ASSERT_TRUE(w.WaitForRuns(1, 30s));
  w.Stop();
  EXPECT_EQ(work.at(), (std::vector<steady::time_point>{t0 + 5s}));
}

TEST(PeriodicWorkerTest, RetryPeriodAfterAFailedRun) {
  FakeClock clock;
  RecordingWork work(clock);
  PeriodicWorkerOptions o = Options(clock, 30s);
  o.retry_period = 5s;
  PeriodicWorker w(o, work.Fn());
  work.SetFail(true);
  const steady::time_point t0 = clock.SteadyNow();
  w.Start();
  ASSERT_TRUE(w.WaitForRuns(1, 30s));
  EXPECT_EQ(w.next_run(), t0 + 5s);
  work.SetFail(false);
  clock.Advance(5s);
  w.Wake();
  ASSERT_TRUE(w.WaitForRuns(2, 30s));
  EXPECT_EQ(w.next_run(), t0 + 35s);
}

TEST(PeriodicWorkerTest, FailedRunWaitsThePeriodWithoutARetryPeriod) {
  FakeClock clock;
  RecordingWork work(clock);
  PeriodicWorker w(Options(clock, 30s), work.Fn());
  work.SetFail(true);
  const steady::time_point t0 = clock.SteadyNow();
  w.Start();
  ASSERT_TRUE(w.WaitForRuns(1, 30s));
  EXPECT_EQ(w.next_run(), t0 + 30s);
}

TEST(PeriodicWorkerTest, JitterStretchesEachWaitWithinItsBound) {
  FakeClock clock;
  RecordingWork work(clock);
  PeriodicWorkerOptions o = Options(clock, 100s);
  o.jitter = 0.5;
  PeriodicWorker w(o, work.Fn());
  w.Start();
  std::vector<steady::duration> waits;
  for (uint64_t run = 1; run <= 20; ++run) {
    ASSERT_TRUE(w.WaitForRuns(run, 30s));
    waits.push_back(w.next_run() - clock.SteadyNow());  // the clock stands still
    w.Trigger();
  }
  for (auto d : waits) {
    EXPECT_GE(d, steady::duration(100s));
    EXPECT_LE(d, steady::duration(150s));
  }
  // Twenty equal draws from a continuous distribution mean no jitter at all.
  EXPECT_NE(std::count(waits.begin(), waits.end(), waits[0]), 20);
}

TEST(PeriodicWorkerTest, TriggersDuringARunMakeOneMoreRun) {
  FakeClock clock;
  Gate gate;
  std::atomic<int> calls{0};
  PeriodicWorker w(Options(clock, 1h), [&]() -> Status {
    if (calls.fetch_add(1) == 0) gate.Pass();
    return Status::Ok();
  });
  w.Start();
  ASSERT_TRUE(gate.WaitEntered(1));
  w.Trigger();
  w.Trigger();
  w.Trigger();
  gate.Open();
  ASSERT_TRUE(w.WaitForRuns(2, 30s));
  // The clock stands still: only a trigger can start another run.
  w.Trigger();
  ASSERT_TRUE(w.WaitForRuns(3, 30s));
  w.Stop();
  EXPECT_EQ(w.runs(), 3u);
  EXPECT_EQ(calls.load(), 3);
}

TEST(PeriodicWorkerTest, StopEndsALongWaitPromptly) {
  // The real clock and an hour-long period: Stop must not wait it out.
  std::atomic<int> calls{0};
  PeriodicWorkerOptions o;
  o.period = 1h;
  PeriodicWorker w(o, [&]() -> Status {
    calls++;
    return Status::Ok();
  });
  w.Start();
  ASSERT_TRUE(w.WaitForRuns(1, 30s));
  auto stopped = std::async(std::launch::async, [&] { w.Stop(); });
  ASSERT_EQ(stopped.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(calls.load(), 1);
}

TEST(PeriodicWorkerTest, StopLetsTheRunInProgressFinish) {
  FakeClock clock;
  Gate gate;
  std::atomic<int> calls{0};
  PeriodicWorker w(Options(clock, 1h), [&]() -> Status {
    calls++;
    gate.Pass();
    return Status::Ok();
  });
  w.Start();
  ASSERT_TRUE(gate.WaitEntered(1));
  auto stopped = std::async(std::launch::async, [&] { w.Stop(); });
  // The run is still inside the work, so Stop cannot have returned.
  EXPECT_EQ(stopped.wait_for(0s), std::future_status::timeout);
  gate.Open();
  ASSERT_EQ(stopped.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(w.runs(), 1u);
  // Stopped: a trigger starts nothing.
  w.Trigger();
  EXPECT_FALSE(w.WaitForRuns(2, 10ms));
  EXPECT_EQ(calls.load(), 1);
}

TEST(PeriodicWorkerTest, WaitForRunsTimesOutWithoutRuns) {
  FakeClock clock;
  PeriodicWorker w(Options(clock, 1h), [] { return Status::Ok(); });
  EXPECT_FALSE(w.WaitForRuns(1, 1ms));
  EXPECT_EQ(w.runs(), 0u);
}

TEST(PeriodicWorkerTest, StartsAgainAfterStop) {
  FakeClock clock;
  PeriodicWorker w(Options(clock, 1h), [] { return Status::Ok(); });
  w.Start();
  w.Start();  // a no-op while running
  ASSERT_TRUE(w.WaitForRuns(1, 30s));
  w.Stop();
  w.Stop();
  w.Start();
  ASSERT_TRUE(w.WaitForRuns(2, 30s));
  w.Stop();
  EXPECT_EQ(w.runs(), 2u);
}

PeriodicWorkerOptions InGroup(const Clock& clock, std::chrono::milliseconds period, PeriodicGroup& group) {
  PeriodicWorkerOptions o = Options(clock, period);
  o.group = &group;
  return o;
}

TEST(PeriodicGroupTest, MembersRunOnTheGroupsThreadAtTheirOwnPeriods) {
  FakeClock clock;
  PeriodicGroup group("test-group");
  Mutex mu;
  std::vector<std::thread::id> threads;
  auto record = [&]() -> Status {
    MutexLock l(mu);
    threads.push_back(std::this_thread::get_id());
    return Status::Ok();
  };
  PeriodicWorker a(InGroup(clock, 10s, group), record);
  PeriodicWorker b(InGroup(clock, 15s, group), record);
  const steady::time_point t0 = clock.SteadyNow();
  a.Start();
  b.Start();
  ASSERT_TRUE(a.WaitForRuns(1, 30s));
  ASSERT_TRUE(b.WaitForRuns(1, 30s));
  EXPECT_EQ(a.next_run(), t0 + 10s);
  EXPECT_EQ(b.next_run(), t0 + 15s);
  clock.Advance(10s);
  a.Wake();
  ASSERT_TRUE(a.WaitForRuns(2, 30s));
  EXPECT_EQ(b.runs(), 1u);  // not due before t0 + 15s
  clock.Advance(5s);
  b.Wake();
  ASSERT_TRUE(b.WaitForRuns(2, 30s));
  a.Stop();
  b.Stop();
  MutexLock l(mu);
  ASSERT_EQ(threads.size(), 4u);
  EXPECT_NE(threads[0], std::this_thread::get_id());
  for (const auto& t : threads) EXPECT_EQ(t, threads[0]);
}

TEST(PeriodicGroupTest, OneRunAtATimeAndATriggerWaitsForTheRunInProgress) {
  FakeClock clock;
  PeriodicGroup group("test-group");
  Gate gate;
  PeriodicWorker slow(InGroup(clock, 1h, group), [&] {
    gate.Pass();
    return Status::Ok();
  });
  std::atomic<int> quick_runs{0};
  PeriodicWorkerOptions qo = InGroup(clock, 1h, group);
  qo.run_at_start = false;
  PeriodicWorker quick(qo, [&] {
    quick_runs++;
    return Status::Ok();
  });
  quick.Start();
  slow.Start();
  ASSERT_TRUE(gate.WaitEntered(1));
  quick.Trigger();
  EXPECT_FALSE(quick.WaitForRuns(1, 20ms));  // the group's thread is inside slow's run
  gate.Open();
  ASSERT_TRUE(quick.WaitForRuns(1, 30s));
  EXPECT_EQ(quick_runs.load(), 1);
  quick.Stop();
  slow.Stop();
}

TEST(PeriodicGroupTest, StopWaitsForTheMembersRunAndTheOthersGoOn) {
  FakeClock clock;
  PeriodicGroup group("test-group");
  Gate gate;
  std::atomic<int> calls{0};
  PeriodicWorker a(InGroup(clock, 1h, group), [&] {
    calls++;
    gate.Pass();
    return Status::Ok();
  });
  PeriodicWorkerOptions bo = InGroup(clock, 1h, group);
  bo.run_at_start = false;
  PeriodicWorker b(bo, [] { return Status::Ok(); });
  b.Start();
  a.Start();
  ASSERT_TRUE(gate.WaitEntered(1));
  auto stopped = std::async(std::launch::async, [&] { a.Stop(); });
  EXPECT_EQ(stopped.wait_for(0s), std::future_status::timeout);
  gate.Open();
  ASSERT_EQ(stopped.wait_for(60s), std::future_status::ready);
  a.Trigger();
  b.Trigger();
  ASSERT_TRUE(b.WaitForRuns(1, 30s));
  EXPECT_EQ(calls.load(), 1);  // a left the group: its trigger ran nothing
  EXPECT_EQ(a.runs(), 1u);
  b.Stop();
  // A member starts again after Stop.
  a.Start();
  ASSERT_TRUE(a.WaitForRuns(2, 30s));
  a.Stop();
}

TEST(PeriodicGroupTest, AMemberTriggeredOverAndOverDoesNotStarveTheOthers) {
  FakeClock clock;
  PeriodicGroup group("test-group");
  PeriodicWorker* self = nullptr;
  std::atomic<bool> busy{true};
  PeriodicWorker eager(InGroup(clock, 1h, group), [&] {
    if (busy.load()) self->Trigger();  // due again at once, every time
    return Status::Ok();
  });
  self = &eager;
  PeriodicWorkerOptions po = InGroup(clock, 1h, group);
  po.run_at_start = false;
  PeriodicWorker patient(po, [] { return Status::Ok(); });
  patient.Start();
  eager.Start();
  ASSERT_TRUE(eager.WaitForRuns(3, 30s));
  patient.Trigger();
  ASSERT_TRUE(patient.WaitForRuns(1, 30s));
  busy = false;
  eager.Stop();
  patient.Stop();
}

}  // namespace
}  // namespace nvdra
