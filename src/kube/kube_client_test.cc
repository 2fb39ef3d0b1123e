#include "kube/kube_client.h"

#include <gtest/gtest.h>

#include <deque>

namespace nvdra::kube {
namespace {

using namespace std::chrono_literals;

// Answers requests from a script and records them.
class ScriptedTransport : public HttpTransport {
 public:
  std::deque<Result<HttpResponse>> answers;
  std::vector<HttpRequest> seen;
  Result<HttpResponse> RoundTrip(const HttpRequest& r) override {
    seen.push_back(r);
    if (answers.empty()) return Internal("script exhausted");
    auto a = answers.front();
    answers.pop_front();
    return a;
  }
};

HttpResponse Resp(long status, std::string body = "{}", std::map<std::string, std::string> headers = {}) {
  return HttpResponse{status, std::move(body), std::move(headers)};
}

struct Harness {
  FakeClock clock;
  std::vector<std::chrono::nanoseconds> sleeps;
  ScriptedTransport* transport = nullptr;
  std::unique_ptr<KubeClient> client;
  explicit Harness(KubeClientOptions o = {}) {
    auto t = std::make_unique<ScriptedTransport>();
    transport = t.get();
    o.clock = &clock;
    o.sleep = [this](std::chrono::nanoseconds d) {
      sleeps.push_back(d);
      clock.Advance(d);
    };
    client = std::make_unique<KubeClient>(std::move(t), o);
  }
};

TEST(KubeClientTest, RetriesOn429HonouringRetryAfter) {
  Harness h;
  h.transport->answers = {Resp(429, "{}", {{"retry-after", "3"}}), Resp(200, R"({"a":1})")};
  auto r = h.client->GetJson("/api/v1/nodes/n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["a"], 1);
  ASSERT_EQ(h.sleeps.size(), 1u);
  EXPECT_EQ(h.sleeps[0], 3s);
  EXPECT_EQ(h.client->stats().retries, 1u);
}

// Every request says how long an answer it reads: an object (a claim, a
// Node) at most 4 MiB, a list at most 64 MiB, far below the transport's own
// 256 MiB, so an odd answer never costs gigabytes to parse.
TEST(KubeClientTest, EachRequestBoundsItsAnswerByWhatItReads) {
  Harness h;
  h.transport->answers = {Resp(200, R"({"kind":"Node"})"), Resp(200, R"({"items":[]})"),
                          Resp(200, R"({"kind":"Node"})")};
  ASSERT_TRUE(h.client->GetJson("/api/v1/nodes/n").ok());
  ASSERT_TRUE(h.client->ListJson("/api/v1/pods", "a=b").ok());
  ASSERT_TRUE(h.client->MergePatchJson("/api/v1/nodes/n", nlohmann::json::object()).ok());
  ASSERT_EQ(h.transport->seen.size(), 3u);
  EXPECT_EQ(h.transport->seen[0].max_body_bytes, kMaxObjectAnswerBytes);
  EXPECT_EQ(h.transport->seen[1].max_body_bytes, kMaxListAnswerBytes);
  EXPECT_EQ(h.transport->seen[2].max_body_bytes, kMaxObjectAnswerBytes);
  EXPECT_EQ(kMaxObjectAnswerBytes, 4u << 20);
  EXPECT_EQ(kMaxListAnswerBytes, 64u << 20);
}

TEST(KubeClientTest, RetriesServerAndConnectionErrorsWithBackoff) {
  KubeClientOptions o;
  o.initial_backoff = 100ms;
  Harness h(o);
  h.transport->answers = {Resp(500), Unavailable("connection refused"), Resp(503), Resp(200)};
  ASSERT_TRUE(h.client->GetJson("/x").ok());
  EXPECT_EQ(h.sleeps, (std::vector<std::chrono::nanoseconds>{100ms, 200ms, 400ms}));
  EXPECT_EQ(h.transport->seen.size(), 4u);
}

TEST(KubeClientTest, RetryAfterOn503AndCap) {
  KubeClientOptions o;
  o.max_retry_after = std::chrono::seconds(10);
  Harness h(o);
  h.transport->answers = {Resp(503, "{}", {{"retry-after", "2"}}), Resp(429, "{}", {{"retry-after", "3600"}}),
                          Resp(429, "{}", {{"retry-after", "99999999999999999999999"}}), Resp(200)};
  ASSERT_TRUE(h.client->GetJson("/x").ok());
  // A value beyond any integer is capped like any other long one.
  EXPECT_EQ(h.sleeps, (std::vector<std::chrono::nanoseconds>{2s, 10s, 10s}));
}

TEST(KubeClientTest, GivesUpAfterMaxAttempts) {
  KubeClientOptions o;
  o.max_attempts = 3;
  Harness h(o);
  h.transport->answers = {Resp(500), Resp(500), Resp(500), Resp(200)};
  auto r = h.client->GetJson("/x");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(h.transport->seen.size(), 3u);
  h.transport->answers = {Unavailable("reset"), Unavailable("reset"), Unavailable("reset")};
  auto r2 = h.client->GetJson("/x");
  EXPECT_EQ(r2.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r2.status().message().find("after 3 attempts"), std::string::npos);
}

TEST(KubeClientTest, NeverRetries4xx) {
  for (long code : {400L, 401L, 403L, 404L, 409L, 422L}) {
    Harness h;
    h.transport->answers = {
        Resp(code, R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"m","reason":"R","code":)" +
                       std::to_string(code) + "}"),
        Resp(200)};
    auto r = h.client->GetJson("/x");
    EXPECT_FALSE(r.ok()) << code;
    EXPECT_EQ(h.transport->seen.size(), 1u) << code;
    EXPECT_NE(r.status().message().find("m (HTTP " + std::to_string(code)), std::string::npos);
  }
}

TEST(KubeClientTest, TlsFailuresAreNotRetried) {
  Harness h;
  h.transport->answers = {FailedPrecondition("TLS verification failed"), Resp(200)};
  EXPECT_EQ(h.client->GetJson("/x").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.transport->seen.size(), 1u);
}

TEST(KubeClientTest, RateLimitBoundsRequests) {
  KubeClientOptions o;
  o.qps = 5;
  o.burst = 10;
  Harness h(o);
  for (int i = 0; i < 30; ++i) h.transport->answers.push_back(Resp(200));
  auto start = h.clock.SteadyNow();
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(h.client->GetJson("/x").ok());
  // 10 at once, then 20 more at 5/s: 4 s of (fake) waiting.
  EXPECT_EQ(h.clock.SteadyNow() - start, 4s);
  EXPECT_EQ(h.client->stats().rate_limited, 20u);
}

TEST(KubeClientTest, StatusMapping) {
  auto st = [](long code, const std::string& reason) {
    return StatusFromResponse("GET", "/p",
                              Resp(code, R"({"kind":"Status","reason":")" + reason + R"(","message":"x"})"))
        .code();
  };
  EXPECT_EQ(st(404, "NotFound"), StatusCode::kNotFound);
  EXPECT_EQ(st(409, "AlreadyExists"), StatusCode::kAlreadyExists);
  EXPECT_EQ(st(409, "Conflict"), StatusCode::kConflict);
  EXPECT_EQ(st(403, "Forbidden"), StatusCode::kPermissionDenied);
  EXPECT_EQ(st(422, "Invalid"), StatusCode::kInvalidArgument);
  EXPECT_TRUE(IsPathNotServed(Resp(404, "404 page not found\n")));
  EXPECT_FALSE(IsPathNotServed(Resp(404, R"({"kind":"Status","reason":"NotFound"})")));
}

TEST(KubeClientTest, DiscoveryPicksPreferredServedVersion) {
  Harness h;
  h.transport->answers = {
      Resp(200, R"({"kind":"APIGroup","versions":[{"version":"v1beta2"},{"version":"v1beta1"}]})"),
      Resp(
          200,
          R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1beta2","metadata":{"name":"c","namespace":"ns","uid":"u"}})"),
      Resp(
          200,
          R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1beta2","metadata":{"name":"c","namespace":"ns","uid":"u"}})")};
  auto c = h.client->GetResourceClaim("ns", "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(h.transport->seen[1].path, "/apis/resource.k8s.io/v1beta2/namespaces/ns/resourceclaims/c");
  // Remembered: no second discovery.
  ASSERT_TRUE(h.client->GetResourceClaim("ns", "c").ok());
  EXPECT_EQ(h.transport->seen.size(), 3u);
}

TEST(KubeClientTest, ObjectNotFoundDoesNotTriggerFallback) {
  Harness h;
  h.transport->answers = {
      Resp(200, R"({"versions":[{"version":"v1"},{"version":"v1beta1"}]})"),
      Resp(
          404,
          R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","message":"not found","code":404})")};
  auto r = h.client->GetResourceClaim("ns", "c");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(h.transport->seen.size(), 2u);
}

TEST(KubeClientTest, UnservedVersionNeverLooksLikeNotFound) {
  Harness h;
  const char* discovery = R"({"versions":[{"version":"v1"}]})";
  h.transport->answers = {Resp(200, discovery), Resp(404, "404 page not found\n"), Resp(200, discovery),
                          Resp(404, "404 page not found\n")};
  auto r = h.client->GetResourceClaim("ns", "c");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(h.transport->seen.size(), 4u);
}

TEST(KubeClientTest, BodiesWithInvalidUtf8AreSentNotThrown) {
  Harness h;
  h.transport->answers = {Resp(201, R"({"metadata":{"name":"s"}})"), Resp(200, "{}")};
  nlohmann::json slice = {{"device", std::string("gpu-\xff")}};
  ASSERT_TRUE(h.client->CreateJson("/x", slice).ok());
  ASSERT_TRUE(h.client->UpdateJson("/x", slice).ok());
  ASSERT_EQ(h.transport->seen.size(), 2u);
  for (const auto& req : h.transport->seen) {
    EXPECT_EQ(req.body, "{\"device\":\"gpu-\xEF\xBF\xBD\"}");  // U+FFFD
  }
}

// A Retry-After no integer type holds once aborted the process (also at
// startup, through the slices LIST): it saturates and is clamped.
TEST(KubeClientTest, HugeRetryAfterIsClampedNotFatal) {
  KubeClientOptions o;
  o.max_retry_after = 60s;
  Harness h(o);
  h.transport->answers = {Resp(429, "{}", {{"retry-after", "99999999999999999999"}}),
                          Resp(503, "{}", {{"retry-after", std::string(400, '9')}}), Resp(200)};
  ASSERT_TRUE(h.client->GetJson("/apis/resource.k8s.io/v1/resourceslices").ok());
  EXPECT_EQ(h.sleeps, (std::vector<std::chrono::nanoseconds>{60s, 60s}));
}

TEST(KubeClientTest, RetryAfterAsHttpDateAndGarbage) {
  KubeClientOptions o;
  o.initial_backoff = 100ms;
  Harness h(o);
  // The fake clock starts at 2023-11-14 22:13:20 UTC.
  h.transport->answers = {Resp(503, "{}", {{"retry-after", "Tue, 14 Nov 2023 22:13:50 GMT"}}),
                          Resp(503, "{}", {{"retry-after", "soon"}}), Resp(503, "{}", {{"retry-after", "-5"}}),
                          Resp(200)};
  ASSERT_TRUE(h.client->GetJson("/x").ok());
  // 30 s from the date; garbage and negative numbers fall back to backoff.
  EXPECT_EQ(h.sleeps, (std::vector<std::chrono::nanoseconds>{30s, 200ms, 400ms}));
}

TEST(KubeClientTest, ParseRetryAfterForms) {
  const Clock::time_point now{std::chrono::seconds(784111777)};  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(ParseRetryAfter("120", now), 120s);
  EXPECT_EQ(ParseRetryAfter(" 7 ", now), 7s);
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:50:37 GMT", now), 60s);
  EXPECT_EQ(ParseRetryAfter("Sunday, 06-Nov-94 08:49:47 GMT", now), 10s);
  EXPECT_EQ(ParseRetryAfter("Sun Nov  6 08:49:39 1994", now), 2s);
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:00:00 GMT", now), 0s);  // in the past: now
  EXPECT_GE(*ParseRetryAfter("99999999999999999999", now), std::chrono::seconds(1'000'000'000));
  EXPECT_GE(*ParseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", now), std::chrono::seconds(1'000'000'000));
  for (const char* bad : {"", "1.5", "-1", "0x10", "Sun, 06 Nov 1994", "tomorrow", "12 s"}) {
    EXPECT_FALSE(ParseRetryAfter(bad, now).has_value()) << bad;
  }
}

// Retries stop at the caller's deadline, and no single request may run past
// it: a slow API server once kept a prepare retrying for 54 s against a 5 s
// deadline.
TEST(KubeClientTest, RetriesStopAtTheDeadline) {
  KubeClientOptions o;
  o.initial_backoff = 300ms;
  Harness h(o);
  h.transport->answers = {Resp(500), Resp(500), Resp(500), Resp(500), Resp(200)};
  auto r = h.client->GetJson("/x", h.clock.SteadyNow() + 1s);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_TRUE(r.status().retryable());
  EXPECT_NE(r.status().message().find("HTTP 500"), std::string::npos) << r.status().message();
  // Attempts at 0, 300 and 900 ms; the next backoff (1.2 s) ends past it.
  ASSERT_EQ(h.transport->seen.size(), 3u);
  EXPECT_EQ(h.transport->seen[0].timeout, 1000ms);
  EXPECT_EQ(h.transport->seen[2].timeout, 100ms);
  EXPECT_EQ(h.sleeps, (std::vector<std::chrono::nanoseconds>{300ms, 600ms}));
}

TEST(KubeClientTest, RetryAfterBeyondTheDeadlineEndsTheCallNow) {
  Harness h;
  h.transport->answers = {Resp(429, "{}", {{"retry-after", "30"}}), Resp(200)};
  auto r = h.client->GetJson("/x", h.clock.SteadyNow() + 5s);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("asked to retry after 30000ms"), std::string::npos) << r.status().message();
  EXPECT_TRUE(h.sleeps.empty());
  EXPECT_EQ(h.transport->seen.size(), 1u);
  // Without a deadline the same answer is waited out.
  h.transport->answers = {Resp(429, "{}", {{"retry-after", "30"}}), Resp(200)};
  EXPECT_TRUE(h.client->GetJson("/x").ok());
}

TEST(KubeClientTest, DeeplyNestedResponsesAreErrors) {
  Harness h;
  const std::string deep = std::string(70'000, '[') + std::string(70'000, ']');
  h.transport->answers = {Resp(200, deep), Resp(200, R"({"versions":[{"version":"v1"}]})"),
                          Resp(200, R"({"kind":"ResourceClaim","metadata":{"name":"c","x":)" + deep + "}}")};
  auto r = h.client->GetJson("/x");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("deeper than"), std::string::npos) << r.status().message();
  // A deep error body is only text to quote.
  EXPECT_EQ(StatusFromResponse("GET", "/p", Resp(404, deep)).code(), StatusCode::kNotFound);
  auto c = h.client->GetResourceClaim("ns", "c");
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
}

TEST(KubeClientTest, QueryEscape) {
  EXPECT_EQ(KubeClient::QueryEscape("spec.nodeName=n1,spec.driver=gpu.nvidia.com"),
            "spec.nodeName%3Dn1%2Cspec.driver%3Dgpu.nvidia.com");
}

}  // namespace
}  // namespace nvdra::kube
