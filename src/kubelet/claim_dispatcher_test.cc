#include "kubelet/claim_dispatcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "kubelet/fake_claim_engine.h"
#include "kubelet/test_util.h"

namespace nvdra::kubelet {
namespace {

using testing::Claim;
using ::testing::HasSubstr;
using testing::Uid;
constexpr auto kLong = std::chrono::seconds(20);

DispatcherOptions Fast(int timeout_ms = 20000) {
  DispatcherOptions o;
  o.claim_timeout = std::chrono::milliseconds(timeout_ms);
  o.workers = 4;
  o.max_claims_per_request = 8;
  return o;
}

FakeClaimBehavior Devices(std::vector<PreparedDevice> d) {
  FakeClaimBehavior b;
  b.devices = std::move(d);
  return b;
}

FakeClaimBehavior Held() {
  FakeClaimBehavior b;
  b.hold = true;
  return b;
}

TEST(ClaimDispatcherTest, OneEntryPerClaimWithEngineResults) {
  FakeClaimEngine engine;
  engine.Set(Uid("a"), Devices({{{"r"}, "p", "gpu-0", {"cdi=a"}, ""}}));
  FakeClaimBehavior bad;
  bad.prepare_error = "device gpu-1 is lost";
  engine.Set(Uid("b"), bad);
  ClaimDispatcher d(engine, Fast());
  auto r = d.Prepare({Claim("a"), Claim("b"), Claim("c")});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(r->at(Uid("a")).status().message(), "");
  ASSERT_EQ(r->at(Uid("a"))->size(), 1u);
  EXPECT_EQ(r->at(Uid("a")).value()[0].device, "gpu-0");
  EXPECT_EQ(r->at(Uid("b")).status().message(), "device gpu-1 is lost");
  EXPECT_EQ(r->at(Uid("b")).status().code(), StatusCode::kInternal);  // the engine's Status as is
  EXPECT_EQ(r->at(Uid("c")).status().message(), "");
  EXPECT_TRUE(r->at(Uid("c"))->empty());
}

TEST(ClaimDispatcherTest, EmptyRequestIsAnEmptyAnswer) {
  FakeClaimEngine engine;
  ClaimDispatcher d(engine, Fast());
  auto p = d.Prepare({});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
  auto u = d.Unprepare({});
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->empty());
}

TEST(ClaimDispatcherTest, EmptyUidFailsTheWholeRequest) {
  FakeClaimEngine engine;
  ClaimDispatcher d(engine, Fast());
  auto r = d.Prepare({Claim("a"), {"default", "", "x"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("claim #2 (default/x) has an empty UID"));
  EXPECT_FALSE(d.Unprepare({{"default", "", "x"}}).ok());
  EXPECT_EQ(engine.Calls(Uid("a")), 0);
}

TEST(ClaimDispatcherTest, MalformedUidsAndNamesArePerClaimErrors) {
  FakeClaimEngine engine;
  ClaimDispatcher d(engine, Fast());
  auto r = d.Prepare({Claim("a"), {"default", "../../etc", "x"}, {"default", "a/b", "x"}, {"Bad_NS", Uid("n"), "x"}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ(r->at(Uid("a")).status().message(), "");
  EXPECT_THAT(r->at("../../etc").status().message(), HasSubstr("is not a valid Kubernetes UID"));
  EXPECT_THAT(r->at("a/b").status().message(), HasSubstr("is not a valid Kubernetes UID"));
  EXPECT_THAT(r->at(Uid("n")).status().message(), HasSubstr("valid Kubernetes object names"));
  EXPECT_EQ(engine.Calls("../../etc"), 0);
  EXPECT_EQ(engine.Calls(Uid("n")), 0);
  auto u = d.Unprepare({{"default", "x.y", "n"}});
  ASSERT_TRUE(u.ok());
  EXPECT_THAT(u->at("x.y").message(), HasSubstr("is not a valid Kubernetes UID"));
}

TEST(ClaimDispatcherTest, DuplicateUidIsRefusedOnce) {
  FakeClaimEngine engine;
  ClaimDispatcher d(engine, Fast());
  auto r = d.Prepare({Claim("a"), Claim("b"), Claim("a")});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_THAT(r->at(Uid("a")).status().message(), HasSubstr("appears 2 times in one prepare request"));
  EXPECT_EQ(r->at(Uid("b")).status().message(), "");
  EXPECT_EQ(engine.Calls(Uid("a")), 0);
}

TEST(ClaimDispatcherTest, HugeRequestIsRefusedPerClaimWithoutEngineCalls) {
  FakeClaimEngine engine;
  ClaimDispatcher d(engine, Fast());  // limit 8
  std::vector<ClaimRef> claims;
  for (int i = 0; i < 9; ++i) claims.push_back(Claim("h" + std::to_string(i)));
  auto r = d.Unprepare(claims);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 9u);
  for (const auto& [uid, err] : *r) {
    EXPECT_THAT(err.message(), HasSubstr("has 9 claims, more than the limit of 8 per call"));
    EXPECT_EQ(err.code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(engine.Completed().empty());
}

TEST(ClaimDispatcherTest, UnprepareOfUnknownClaimSucceeds) {
  FakeClaimEngine engine;
  ClaimDispatcher d(engine, Fast());
  auto r = d.Unprepare({Claim("never-prepared")});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->at(Uid("never-prepared")).message(), "");
}

TEST(ClaimDispatcherTest, SlowClaimDoesNotDelayAnotherInTheSameRequest) {
  FakeClaimEngine engine;
  engine.Set(Uid("slow"), Held());
  ClaimDispatcher d(engine, Fast());
  auto call = std::async(std::launch::async, [&] { return d.Prepare({Claim("slow"), Claim("fast")}); });
  ASSERT_TRUE(engine.WaitCompleted(1, kLong));
  EXPECT_EQ(engine.Completed(), std::vector<std::string>({"prepare:" + Uid("fast")}));
  engine.Release(Uid("slow"));
  auto r = call.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->at(Uid("slow")).status().message(), "");
  EXPECT_EQ(engine.Completed().back(), "prepare:" + Uid("slow"));
}

TEST(ClaimDispatcherTest, SlowClaimDoesNotDelayAnotherRequest) {
  FakeClaimEngine engine;
  engine.Set(Uid("slow"), Held());
  ClaimDispatcher d(engine, Fast());
  auto slow = std::async(std::launch::async, [&] { return d.Prepare({Claim("slow")}); });
  ASSERT_TRUE(engine.WaitStarted(Uid("slow"), kLong));
  auto fast = d.Unprepare({Claim("other")});  // returns while "slow" is held
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->at(Uid("other")).message(), "");
  EXPECT_EQ(slow.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  engine.Release(Uid("slow"));
  EXPECT_TRUE(slow.get().ok());
}

TEST(ClaimDispatcherTest, CallsInFlightAreEachAnsweredWhenTheirOwnClaimFinishes) {
  // Each waiting call is woken by its own claim alone: released in another
  // order than they came, every call still gets its own answer at once and
  // the others keep waiting (a missed wake-up would show as a timeout).
  FakeClaimEngine engine;
  for (const char* c : {"a", "b", "c"}) engine.Set(Uid(c), Held());
  ClaimDispatcher d(engine, Fast(10000));
  std::map<std::string, std::future<Result<std::map<std::string, PrepareOutcome>>>> calls;
  for (const char* c : {"a", "b", "c"}) {
    calls[c] = std::async(std::launch::async, [&d, c] { return d.Prepare({Claim(c)}); });
    ASSERT_TRUE(engine.WaitStarted(Uid(c), kLong));
  }
  for (const char* c : {"c", "a", "b"}) {
    engine.Release(Uid(c));
    auto r = calls[c].get();
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ(r->at(Uid(c)).status().message(), "") << c;
    for (auto& [other, f] : calls) {
      if (f.valid()) EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::timeout) << other;
    }
  }
}

TEST(ClaimDispatcherTest, DeadlineGivesRetryableErrorAndRetryJoinsTheRunningWork) {
  FakeClaimEngine engine;
  engine.Set(Uid("a"), Held());
  ClaimDispatcher d(engine, Fast(100));
  auto first = d.Prepare({Claim("a")});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->at(Uid("a")).status().message(),
            "prepare of claim default/claim-a:" + Uid("a") +
                " did not finish within 100ms; it goes on in the background and the kubelet will retry");
  auto retry = d.Prepare({Claim("a")});
  ASSERT_TRUE(retry.ok());
  EXPECT_THAT(retry->at(Uid("a")).status().message(), HasSubstr("did not finish within 100ms"));
  EXPECT_EQ(engine.Calls(Uid("a")), 1);  // the retry waited for the same work
  engine.Release(Uid("a"));
  ASSERT_TRUE(engine.WaitCompleted(1, kLong));
}

TEST(ClaimDispatcherTest, CallersOwnDeadlineCutsTheWaitShort) {
  FakeClaimEngine engine;
  engine.Set(Uid("a"), Held());
  ClaimDispatcher d(engine, Fast(60000));
  auto r = d.Prepare({Claim("a"), Claim("b")}, ClaimDispatcher::Clock::now() + std::chrono::milliseconds(50));
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->at(Uid("a")).status().message(), HasSubstr("kubelet will retry"));
  EXPECT_EQ(r->at(Uid("a")).status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(r->at(Uid("b")).status().message(), "");
  engine.Release(Uid("a"));
}

TEST(ClaimDispatcherTest, OperationsOnOneClaimRunInArrivalOrder) {
  FakeClaimEngine engine;
  FakeClaimBehavior held = Held();
  engine.Set(Uid("a"), held);
  ClaimDispatcher d(engine, Fast(50));
  auto p = d.Prepare({Claim("a")});  // times out, still held
  ASSERT_TRUE(p.ok());
  auto u = d.Unprepare({Claim("a")});  // queued behind the prepare, times out
  ASSERT_TRUE(u.ok());
  EXPECT_THAT(u->at(Uid("a")).message(), HasSubstr("unprepare of claim default/claim-a"));
  EXPECT_EQ(engine.Calls(Uid("a")), 1);  // unprepare not started yet
  engine.Set(Uid("a"), FakeClaimBehavior{});
  engine.Release(Uid("a"));
  ASSERT_TRUE(engine.WaitCompleted(2, kLong));
  EXPECT_EQ(engine.Completed(), std::vector<std::string>({"prepare:" + Uid("a"), "unprepare:" + Uid("a")}));
  EXPECT_TRUE(engine.Prepared().empty());
}

TEST(ClaimDispatcherTest, ShutdownAnswersWaitingCallsAndRefusesNewOnes) {
  FakeClaimEngine engine;
  engine.Set(Uid("a"), Held());
  ClaimDispatcher d(engine, Fast());
  auto call = std::async(std::launch::async, [&] { return d.Prepare({Claim("a")}); });
  ASSERT_TRUE(engine.WaitStarted(Uid("a"), kLong));
  std::thread stopper([&] { d.Shutdown(); });  // waits for the held engine call
  auto r = call.get();
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->at(Uid("a")).status().message(), HasSubstr("plugin is shutting down"));
  EXPECT_EQ(r->at(Uid("a")).status().code(), StatusCode::kUnavailable);
  engine.CancelAll();
  stopper.join();
  auto late = d.Prepare({Claim("b")});
  ASSERT_TRUE(late.ok());
  EXPECT_THAT(late->at(Uid("b")).status().message(), HasSubstr("shutting down"));
  EXPECT_EQ(engine.Calls(Uid("b")), 0);
}

// The asynchronous entry the gRPC callback services use: no thread waits
// for the call; the worker that finishes its last claim answers it.
TEST(ClaimDispatcherTest, StartPrepareAnswersFromTheWorkerWithoutAWaitingThread) {
  FakeClaimEngine engine;
  engine.Set(Uid("a"), Held());
  engine.Set(Uid("b"), Devices({{{"r"}, "p", "gpu-1", {"cdi=b"}, ""}}));
  ClaimDispatcher d(engine, Fast());
  std::promise<Result<ClaimDispatcher::PrepareResults>> answered;
  std::atomic<std::thread::id> answered_on{};
  auto call = d.StartPrepare({Claim("a"), Claim("b")}, ClaimDispatcher::Clock::time_point::max(),
                             [&](Result<ClaimDispatcher::PrepareResults> r, ClaimDispatcher::Clock::duration) {
                               answered_on = std::this_thread::get_id();
                               answered.set_value(std::move(r));
                             });
  ASSERT_NE(call, nullptr);  // returned while claim a still runs
  ASSERT_TRUE(engine.WaitStarted(Uid("a"), kLong));
  auto result = answered.get_future();
  EXPECT_EQ(result.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  engine.Release(Uid("a"));
  auto r = result.get();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_TRUE(r->at(Uid("a")).ok());
  EXPECT_EQ(r->at(Uid("b")).value()[0].device, "gpu-1");
  EXPECT_NE(answered_on.load(), std::this_thread::get_id());
  d.Expire(call);  // after the answer: nothing more happens
}

TEST(ClaimDispatcherTest, ExpireAnswersTheClaimsStillRunningAndTheRetryJoinsThem) {
  FakeClaimEngine engine;
  engine.Set(Uid("a"), Held());
  ClaimDispatcher d(engine, Fast());
  int answers = 0;
  Result<ClaimDispatcher::UnprepareResults> got = Internal("not answered");
  auto call = d.StartUnprepare({Claim("a")}, ClaimDispatcher::Clock::time_point::max(),
                               [&](Result<ClaimDispatcher::UnprepareResults> r, ClaimDispatcher::Clock::duration) {
                                 ++answers;
                                 got = std::move(r);
                               });
  ASSERT_TRUE(engine.WaitStarted(Uid("a"), kLong));
  EXPECT_LE(ClaimDispatcher::Deadline(call), ClaimDispatcher::Clock::now() + std::chrono::seconds(20));
  d.Expire(call);  // the timer's job: answered on this thread
  ASSERT_EQ(answers, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->at(Uid("a")).code(), StatusCode::kDeadlineExceeded);
  d.Expire(call);
  EXPECT_EQ(answers, 1);
  // The retry joins the running work instead of starting it again.
  std::promise<Result<ClaimDispatcher::UnprepareResults>> retried;
  d.StartUnprepare({Claim("a")}, ClaimDispatcher::Clock::time_point::max(),
                   [&](Result<ClaimDispatcher::UnprepareResults> r, ClaimDispatcher::Clock::duration) {
                     retried.set_value(std::move(r));
                   });
  engine.Release(Uid("a"));
  auto r = retried.get_future().get();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->at(Uid("a")).ok()) << r->at(Uid("a")).message();
  EXPECT_EQ(engine.Calls(Uid("a")), 1);
  EXPECT_EQ(answers, 1);  // the expired call is not answered twice
}

TEST(ClaimDispatcherTest, EngineExceptionBecomesAnInternalErrorOfThatClaimAlone) {
  FakeClaimEngine engine;
  FakeClaimBehavior boom;
  boom.throw_message = "stoll";
  engine.Set(Uid("a"), boom);
  DispatcherOptions o = Fast();
  o.workers = 1;  // the later calls run only if the one worker survived
  ClaimDispatcher d(engine, o);
  auto r = d.Prepare({Claim("a"), Claim("b")});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->at(Uid("a")).status().message(),
              HasSubstr("internal error in prepare of claim default/claim-a:" + Uid("a")));
  EXPECT_THAT(r->at(Uid("a")).status().message(), HasSubstr("unexpected exception: stoll"));
  EXPECT_EQ(r->at(Uid("b")).status().message(), "");
  auto u = d.Unprepare({Claim("a")});
  ASSERT_TRUE(u.ok());
  EXPECT_THAT(u->at(Uid("a")).message(), HasSubstr("internal error in unprepare of claim default/claim-a"));
  // The claim's chain was released: the next operation on it runs normally.
  engine.Set(Uid("a"), FakeClaimBehavior{});
  auto again = d.Prepare({Claim("a")});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->at(Uid("a")).status().message(), "");
  EXPECT_EQ(engine.Calls(Uid("a")), 3);
  EXPECT_EQ(engine.Prepared(), std::set<std::string>({Uid("a"), Uid("b")}));
}

// Keeps what the dispatcher hands to RecordSteps.
class StepsEngine final : public ClaimEngine {
 public:
  struct Record {
    bool prepare, whole_request;
    int64_t total, engine_other, kind_work;
  };
  // How long the kind's work of each claim runs, on the steady clock.
  static constexpr auto kKindWork = std::chrono::milliseconds(2);
  PrepareOutcome PrepareClaim(const ClaimRef&, std::chrono::steady_clock::time_point) override {
    saw_record = CurrentRequestSteps() != nullptr;
    TimedStep step(RequestStep::kKindWork);
    const auto until = std::chrono::steady_clock::now() + kKindWork;
    while (std::chrono::steady_clock::now() < until) {
    }
    return std::vector<PreparedDevice>{};
  }
  Status UnprepareClaim(const ClaimRef&, std::chrono::steady_clock::time_point) override { return Status::Ok(); }
  void RecordSteps(bool prepare, const RequestSteps& steps, bool whole_request) override {
    std::lock_guard<std::mutex> l(mu);
    records.push_back({prepare, whole_request, steps.total_nanos(), steps.nanos(RequestStep::kEngineOther),
                       steps.nanos(RequestStep::kKindWork)});
  }
  std::mutex mu;
  std::vector<Record> records;
  std::atomic<bool> saw_record{false};
};

TEST(ClaimDispatcherTest, TimesEachClaimOnItsWorkerAndLeavesThatTimeOutOfTheCallsDispatch) {
  StepsEngine engine;
  ClaimDispatcher d(engine, Fast());
  const auto t0 = std::chrono::steady_clock::now();
  RequestSteps call(RequestStep::kRpcOther, t0);
  {
    ScopedSteps scope(&call);
    ASSERT_TRUE(d.Prepare({Claim("a")}).ok());
  }
  call.Finish();
  const int64_t wall = (std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(engine.saw_record);
  auto records = [&engine] {
    std::lock_guard<std::mutex> l(engine.mu);
    return engine.records;
  };
  // The claim's record, from its worker; the call's is its caller's to hand on.
  ASSERT_EQ(records().size(), 1u);
  const StepsEngine::Record claim = records()[0];
  EXPECT_TRUE(claim.prepare);
  EXPECT_FALSE(claim.whole_request);
  EXPECT_EQ(claim.total, claim.engine_other + claim.kind_work);
  const int64_t kind_work = std::chrono::nanoseconds(StepsEngine::kKindWork).count();
  EXPECT_GE(claim.kind_work, kind_work);
  // The worker's time is in the claim's record only: the call's dispatch
  // step, which waited for it, is charged the wait without it, and the two
  // records together fit in the call's wall time.
  EXPECT_LE(call.nanos(RequestStep::kDispatch), wall - claim.total);
  EXPECT_LE(call.total_nanos() + claim.total, wall);
  d.RecordCallSteps(false, call);
  ASSERT_EQ(records().size(), 2u);
  EXPECT_FALSE(records()[1].prepare);
  EXPECT_TRUE(records()[1].whole_request);
  EXPECT_EQ(records()[1].total, call.total_nanos());
}

}  // namespace
}  // namespace nvdra::kubelet
