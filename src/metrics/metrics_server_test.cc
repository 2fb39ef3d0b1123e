#include "metrics/metrics_server.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace nvdra::metrics {
namespace {

struct HttpReply {
  long code = 0;
  std::string body;
  std::string content_type;
  CURLcode err = CURLE_OK;
};

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

HttpReply Get(const std::string& url, long timeout_s = 10) {
  HttpReply r;
  CURL* c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  r.err = curl_easy_perform(c);
  if (r.err == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
    char* ct = nullptr;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (ct) r.content_type = ct;
  }
  curl_easy_cleanup(c);
  return r;
}

std::string Url(const MetricsServer& s, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(s.port()) + path;
}

TEST(ParseEndpointTest, Forms) {
  auto a = ParseEndpoint(":8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "");
  EXPECT_EQ(a->port, 8080);
  auto b = ParseEndpoint("127.0.0.1:0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "127.0.0.1");
  EXPECT_EQ(b->port, 0);
  auto c = ParseEndpoint("[::1]:9090");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 9090);
  for (const char* bad : {"8080", "host:", "host:http", ":65536", "::1:80", "[::1:80", ":-1"}) {
    auto r = ParseEndpoint(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--http-endpoint"), std::string::npos) << bad;
  }
}

TEST(MetricsServerTest, ServesMetricsAndHealthOverLoopback) {
  MetricRegistry reg;
  auto* c = reg.AddCounter("served_total", "Served.", {"k"}).value();
  c->WithLabels({"v"}).Inc(7);
  MetricsServer server(reg, {.endpoint = "127.0.0.1:0", .metrics_path = "/custom-metrics"});
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);
  EXPECT_TRUE(server.running());

  HttpReply m = Get(Url(server, "/custom-metrics"));
  ASSERT_EQ(m.err, CURLE_OK) << curl_easy_strerror(m.err);
  EXPECT_EQ(m.code, 200);
  EXPECT_EQ(m.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(m.body, reg.Render());
  EXPECT_NE(m.body.find("served_total{k=\"v\"} 7\n"), std::string::npos);

  // A scrape sees live values, not a snapshot taken at start.
  c->WithLabels({"v"}).Inc();
  EXPECT_NE(Get(Url(server, "/custom-metrics")).body.find("served_total{k=\"v\"} 8\n"), std::string::npos);

  HttpReply h = Get(Url(server, "/healthz"));
  EXPECT_EQ(h.code, 200);
  EXPECT_EQ(h.body, "ok");

  EXPECT_EQ(Get(Url(server, "/metrics")).code, 404);

  int port = server.port();
  server.Stop();
  EXPECT_FALSE(server.running());
  HttpReply after = Get("http://127.0.0.1:" + std::to_string(port) + "/healthz");
  EXPECT_NE(after.err, CURLE_OK);
  server.Stop();  // idempotent
}

// promhttp's handler metrics, as upstream's page has them: the scrape being
// served counts in flight, and is counted by its code once answered.
TEST(MetricsServerTest, ScrapesAreCountedAsPromhttpCountsThem) {
  MetricRegistry reg;
  auto handler = HandlerMetrics::Create(reg);
  ASSERT_TRUE(handler.ok()) << handler.status().ToString();
  MetricsServer server(reg, {.endpoint = "127.0.0.1:0", .handler_metrics = *handler});
  ASSERT_TRUE(server.Start().ok());
  const std::string first = Get(Url(server, "/metrics")).body;
  EXPECT_NE(first.find("# HELP promhttp_metric_handler_requests_total Total number of scrapes by HTTP status code.\n"
                       "# TYPE promhttp_metric_handler_requests_total counter\n"
                       "promhttp_metric_handler_requests_total{code=\"200\"} 0\n"
                       "promhttp_metric_handler_requests_total{code=\"500\"} 0\n"
                       "promhttp_metric_handler_requests_total{code=\"503\"} 0\n"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("# HELP promhttp_metric_handler_requests_in_flight Current number of scrapes being served.\n"
                       "# TYPE promhttp_metric_handler_requests_in_flight gauge\n"
                       "promhttp_metric_handler_requests_in_flight 1\n"),
            std::string::npos)
      << first;
  // Neither /healthz nor an unknown path is a scrape.
  EXPECT_EQ(Get(Url(server, "/healthz")).code, 200);
  EXPECT_EQ(Get(Url(server, "/nothing")).code, 404);
  const std::string second = Get(Url(server, "/metrics")).body;
  EXPECT_NE(second.find("promhttp_metric_handler_requests_total{code=\"200\"} 1\n"), std::string::npos) << second;
  EXPECT_EQ(handler->in_flight->Value(), 0);
}

TEST(MetricsServerTest, AllInterfacesEndpointIsReachableOnLoopback) {
  MetricRegistry reg;
  ASSERT_TRUE(reg.AddGauge("up", "Up.").ok());
  MetricsServer server(reg, {.endpoint = ":0"});
  ASSERT_TRUE(server.Start().ok());
  HttpReply m = Get(Url(server, "/metrics"));
  ASSERT_EQ(m.err, CURLE_OK) << curl_easy_strerror(m.err);
  EXPECT_EQ(m.code, 200);
  EXPECT_NE(m.body.find("up 0\n"), std::string::npos);
}

TEST(MetricsServerTest, BindFailureIsAnError) {
  MetricRegistry reg;
  MetricsServer first(reg, {.endpoint = "127.0.0.1:0"});
  ASSERT_TRUE(first.Start().ok());
  MetricsServer second(reg, {.endpoint = "127.0.0.1:" + std::to_string(first.port())});
  Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(first.port())), std::string::npos);
  EXPECT_FALSE(second.running());
  // The first server is unaffected.
  EXPECT_EQ(Get(Url(first, "/healthz")).code, 200);
}

TEST(MetricsServerTest, RejectsBadConfiguration) {
  MetricRegistry reg;
  MetricsServer bad_endpoint(reg, {.endpoint = "nonsense"});
  EXPECT_EQ(bad_endpoint.Start().code(), StatusCode::kInvalidArgument);
  MetricsServer bad_path(reg, {.endpoint = "127.0.0.1:0", .metrics_path = "metrics"});
  EXPECT_EQ(bad_path.Start().code(), StatusCode::kInvalidArgument);
  MetricsServer non_local(reg, {.endpoint = "192.0.2.1:0"});  // TEST-NET-1, never local
  EXPECT_EQ(non_local.Start().code(), StatusCode::kUnavailable);
}

TEST(MetricsServerTest, StartStopStartAgain) {
  MetricRegistry reg;
  MetricsServer server(reg, {.endpoint = "127.0.0.1:0"});
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.Start().code(), StatusCode::kFailedPrecondition);
  server.Stop();
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(Get(Url(server, "/healthz")).body, "ok");
}

// A raw loopback TCP connection to the server, for clients no HTTP library
// would be: half-sent requests, tricklers, readers that never read.
int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

void Send(int fd, const std::string& s) { (void)!::send(fd, s.data(), s.size(), MSG_NOSIGNAL); }

// Reads until the server closes the connection.
std::string ReadToEof(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Half-sent requests that keep trickling header bytes once held the server's
// few workers, and /metrics went unanswered for over 70 s. A scrape must be
// answered while such clients are connected.
TEST(MetricsServerTest, TricklingHalfSentRequestsDoNotStallScrapes) {
  MetricRegistry reg;
  ASSERT_TRUE(reg.AddGauge("up", "Up.").ok());
  MetricsServer server(reg, {.endpoint = "127.0.0.1:0"});
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    slow.push_back(Connect(server.port()));
    Send(slow.back(), "GET /metrics HTTP/1.1\r\nHost: x\r\n");
  }
  // The attack: every client keeps sending a header line now and then, so no
  // per-read timeout ever fires. It runs until the scrape has its answer.
  std::atomic<bool> scraped{false};
  std::thread trickle([&] {
    while (!scraped.load()) {
      for (int fd : slow) Send(fd, "X: y\r\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  HttpReply m = Get(Url(server, "/metrics"), /*timeout_s=*/60);
  scraped = true;
  trickle.join();
  ASSERT_EQ(m.err, CURLE_OK) << curl_easy_strerror(m.err);
  EXPECT_EQ(m.code, 200);
  EXPECT_NE(m.body.find("up 0\n"), std::string::npos);
  for (int fd : slow) ::close(fd);
}

TEST(MetricsServerTest, ASlowClientIsCutOffAtItsDeadline) {
  MetricRegistry reg;
  MetricsServer server(reg, {.endpoint = "127.0.0.1:0", .connection_timeout = std::chrono::milliseconds(200)});
  ASSERT_TRUE(server.Start().ok());
  int fd = Connect(server.port());
  Send(fd, "GET /metrics HTTP/1.1\r\n");
  // Returns once the server gives up on the request: it never answers it.
  EXPECT_EQ(ReadToEof(fd), "");
  ::close(fd);
  EXPECT_EQ(Get(Url(server, "/healthz")).code, 200);
}

TEST(MetricsServerTest, AFloodOfIdleConnectionsCannotLockScrapesOut) {
  MetricRegistry reg;
  MetricsServer server(reg, {.endpoint = "127.0.0.1:0", .max_connections = 16});
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) idle.push_back(Connect(server.port()));
  HttpReply m = Get(Url(server, "/metrics"), /*timeout_s=*/60);
  ASSERT_EQ(m.err, CURLE_OK) << curl_easy_strerror(m.err);
  EXPECT_EQ(m.code, 200);
  for (int fd : idle) ::close(fd);
}

TEST(MetricsServerTest, RawRequestsGetCompleteAnswers) {
  MetricRegistry reg;
  ASSERT_TRUE(reg.AddGauge("up", "Up.").ok());
  MetricsServer server(reg, {.endpoint = "127.0.0.1:0"});
  ASSERT_TRUE(server.Start().ok());
  auto ask = [&](const std::string& request) {
    int fd = Connect(server.port());
    Send(fd, request);
    std::string reply = ReadToEof(fd);
    ::close(fd);
    return reply;
  };
  std::string ok = ask("GET /metrics?x=1 HTTP/1.0\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("\r\n\r\n# HELP up Up.\n"), std::string::npos) << ok;
  std::string head = ask("HEAD /healthz HTTP/1.1\nHost: x\n\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: 2\r\n"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");  // no body
  EXPECT_EQ(ask("POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0), 0u);
  EXPECT_EQ(ask("nonsense\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  EXPECT_EQ(ask("GET /" + std::string(20'000, 'a')).rfind("HTTP/1.1 431", 0), 0u);
}

}  // namespace
}  // namespace nvdra::metrics
