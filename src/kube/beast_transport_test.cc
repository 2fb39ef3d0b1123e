// BeastTransport on the wire. A scripted loopback server shows what the test
// API server cannot: how many connections a client opened, a kept-alive
// connection the server closes, a body that stops or breaks mid-way. TLS
// verification, client certificates and keep-alive over TLS run against the
// test API server in HTTPS mode.
#include "kube/beast_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "test_apiserver.h"
#include "util/mutex.h"
#include "util/test_paths.h"

namespace nvdra::kube {
namespace {

using nvdra::testing::TestApiServer;
using nvdra::testing::TestApiServerOptions;

const std::string kApiFixtures = std::string(NVDRA_SHARED_DIR) + "/fixtures/kubernetes-api";

// A loopback HTTP/1.1 server answering from a script, one connection at a
// time (enough for one client thread), counting the connections it accepts.
class ScriptedServer {
 public:
  // What to do with one request: send `reply` as is, then close the
  // connection if `close` (whatever the reply said), or keep it open without
  // reading further if `hold`, until the server is destroyed.
  struct Action {
    std::string reply;
    bool close = false;
    bool hold = false;
  };
  // conn: 1-based connection number; req: 1-based request number on it.
  using Script = std::function<Action(int conn, int req, const std::string& request)>;

  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listen_fd_, 8) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback: " << errno;
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }

  ~ScriptedServer() {
    {
      MutexLock l(mu_);
      stopping_ = true;
      if (conn_fd_ >= 0) ::shutdown(conn_fd_, SHUT_RDWR);
      cv_.NotifyAll();
    }
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(listen_fd_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  int accepted() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return accepted_;
  }
  std::vector<std::string> requests() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return requests_;
  }
  // Blocks until the server has closed `n` connections itself.
  void WaitClosed(int n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    cv_.Wait(mu_, [&]() REQUIRES(mu_) { return closed_ >= n; });
  }

 private:
  void Serve() {
    for (int conn = 1;; ++conn) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      {
        MutexLock l(mu_);
        if (stopping_) {
          ::close(fd);
          return;
        }
        ++accepted_;
        conn_fd_ = fd;
      }
      ServeConnection(fd, conn);
      MutexLock l(mu_);
      conn_fd_ = -1;
      ::close(fd);
    }
  }

  void ServeConnection(int fd, int conn) {
    std::string in;
    for (int req = 1;; ++req) {
      size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        if (!Read(fd, &in)) return;
      }
      size_t length = 0;
      std::string head = in.substr(0, end);
      for (const char* name : {"\r\nContent-Length:", "\r\ncontent-length:"}) {
        if (size_t p = head.find(name); p != std::string::npos) length = std::stoul(head.substr(p + 17));
      }
      while (in.size() < end + 4 + length) {
        if (!Read(fd, &in)) return;
      }
      std::string request = in.substr(0, end + 4 + length);
      in.erase(0, request.size());
      {
        MutexLock l(mu_);
        requests_.push_back(request);
      }
      Action a = script_(conn, req, request);
      if (!a.reply.empty()) (void)::send(fd, a.reply.data(), a.reply.size(), MSG_NOSIGNAL);
      if (a.hold) {
        MutexLock l(mu_);
        cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stopping_; });
        return;
      }
      if (a.close) {
        ::shutdown(fd, SHUT_RDWR);
        MutexLock l(mu_);
        ++closed_;
        cv_.NotifyAll();
        return;
      }
    }
  }

  static bool Read(int fd, std::string* in) {
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in->append(buf, static_cast<size_t>(n));
    return true;
  }

  Script script_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  int conn_fd_ GUARDED_BY(mu_) = -1;
  int accepted_ GUARDED_BY(mu_) = 0;
  int closed_ GUARDED_BY(mu_) = 0;
  std::vector<std::string> requests_ GUARDED_BY(mu_);
};

std::string WithLength(const std::string& body, int status = 200) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\nX-Trace-ID: Abc\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
std::string Chunk(const std::string& data) {
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", data.size());
  return std::string(size) + "\r\n" + data + "\r\n";
}
const std::string kChunkedHead =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

KubeConfig PlainConfig(const ScriptedServer& s) {
  KubeConfig c;
  c.server = s.url();
  c.token = "t0k";
  return c;
}

TEST(BeastTransportTest, KeepsOneConnectionAliveAcrossRequests) {
  ScriptedServer server([](int, int req, const std::string&) {
    std::string body = "{\"n\":" + std::to_string(req) + "}";
    if (req % 2 == 1) return ScriptedServer::Action{WithLength(body)};
    return ScriptedServer::Action{kChunkedHead + Chunk(body.substr(0, 3)) + Chunk(body.substr(3)) + "0\r\n\r\n"};
  });
  BeastTransport t(PlainConfig(server));
  for (int i = 1; i <= 5; ++i) {
    auto r = t.RoundTrip({"GET", "/api/v1/nodes/n" + std::to_string(i), "", std::chrono::milliseconds(5000)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{\"n\":" + std::to_string(i) + "}") << "content-length and chunked bodies alike";
    if (i % 2 == 1) EXPECT_EQ(r->Header("x-trace-id"), "Abc");
  }
  auto post = t.RoundTrip({"POST", "/apis/x", "{\"a\":1}", std::chrono::milliseconds(5000)});
  ASSERT_TRUE(post.ok()) << post.status().ToString();
  EXPECT_EQ(server.accepted(), 1);
  EXPECT_EQ(t.stats().connections, 1u);
  EXPECT_EQ(t.stats().reuses, 5u);

  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0].rfind("GET /api/v1/nodes/n1 HTTP/1.1\r\n", 0), 0u) << seen[0];
  for (const char* h : {"Authorization: Bearer t0k\r\n", "Accept: application/json\r\n",
                        "Content-Type: application/json\r\n", "Host: 127.0.0.1:"}) {
    EXPECT_NE(seen[0].find(h), std::string::npos) << h << " missing in " << seen[0];
  }
  EXPECT_NE(seen[5].find("Content-Length: 7\r\n\r\n{\"a\":1}"), std::string::npos) << seen[5];
}

// Every request goes out as the fields of HTTP/1.1 in a fixed order, with a
// Content-Length where there is a body (and on POST and PUT without one),
// and the content type of a JSON merge patch on PATCH.
TEST(BeastTransportTest, RequestsGoOutByteForByte) {
  ScriptedServer server([](int, int, const std::string&) { return ScriptedServer::Action{WithLength("{}")}; });
  BeastTransport t(PlainConfig(server));
  const std::string host = "Host: " + server.url().substr(std::string("http://").size()) + "\r\n";
  const std::string common = "User-Agent: nvdra\r\nAccept: application/json\r\n";
  const std::string json = "Content-Type: application/json\r\n";
  const std::string auth = "Authorization: Bearer t0k\r\n";
  struct Case {
    HttpRequest request;
    std::string want;
  };
  const std::vector<Case> cases = {
      {{"GET", "/api/v1/nodes/n1?x=1", ""},
       "GET /api/v1/nodes/n1?x=1 HTTP/1.1\r\n" + host + common + json + auth + "\r\n"},
      {{"POST", "/apis/x", ""},
       "POST /apis/x HTTP/1.1\r\n" + host + common + json + auth + "Content-Length: 0\r\n\r\n"},
      {{"PUT", "/apis/x", "{\"a\":1}"},
       "PUT /apis/x HTTP/1.1\r\n" + host + common + json + auth + "Content-Length: 7\r\n\r\n{\"a\":1}"},
      {{"PATCH", "/apis/x", "{}"},
       "PATCH /apis/x HTTP/1.1\r\n" + host + common + "Content-Type: application/merge-patch+json\r\n" + auth +
           "Content-Length: 2\r\n\r\n{}"},
      {{"DELETE", "/apis/x", ""}, "DELETE /apis/x HTTP/1.1\r\n" + host + common + json + auth + "\r\n"},
      {{"DELETE", "/apis/x", "{}"},
       "DELETE /apis/x HTTP/1.1\r\n" + host + common + json + auth + "Content-Length: 2\r\n\r\n{}"},
  };
  for (const auto& c : cases) ASSERT_TRUE(t.RoundTrip(c.request).ok()) << c.request.method;
  auto seen = server.requests();
  ASSERT_EQ(seen.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(seen[i], cases[i].want);
}

// The server closed the idle connection (its idle timeout): the next request
// notices before sending and goes out on a fresh connection, whatever its
// method.
TEST(BeastTransportTest, IdleConnectionClosedByTheServerIsReplaced) {
  ScriptedServer server([](int conn, int, const std::string&) {
    return ScriptedServer::Action{WithLength("{}"), /*close=*/conn == 1};
  });
  BeastTransport t(PlainConfig(server));
  ASSERT_TRUE(t.RoundTrip({"GET", "/a", "", std::chrono::milliseconds(5000)}).ok());
  server.WaitClosed(1);
  auto r = t.RoundTrip({"POST", "/b", "{}", std::chrono::milliseconds(5000)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(server.accepted(), 2);
  EXPECT_EQ(t.stats().retries, 0u);
  EXPECT_EQ(server.requests().size(), 2u);
}

// The server closes a kept-alive connection just as a request arrives on
// it, without answering. A GET is sent once more on a fresh connection; a
// POST is not (the server may have acted on it) and fails as kUnavailable.
TEST(BeastTransportTest, OnlyReplayableRequestsAreResentAfterTheConnectionDied) {
  ScriptedServer server([](int, int req, const std::string&) {
    if (req == 2) return ScriptedServer::Action{"", /*close=*/true};
    return ScriptedServer::Action{WithLength("{\"ok\":true}")};
  });
  BeastTransport t(PlainConfig(server));
  ASSERT_TRUE(t.RoundTrip({"GET", "/1", "", std::chrono::milliseconds(5000)}).ok());
  auto get = t.RoundTrip({"GET", "/2", "", std::chrono::milliseconds(5000)});
  ASSERT_TRUE(get.ok()) << get.status().ToString();
  EXPECT_EQ(get->body, "{\"ok\":true}");
  EXPECT_EQ(t.stats().retries, 1u);
  EXPECT_EQ(server.accepted(), 2);

  auto post = t.RoundTrip({"POST", "/3", "{}", std::chrono::milliseconds(5000)});
  EXPECT_EQ(post.status().code(), StatusCode::kUnavailable) << post.status().ToString();
  EXPECT_NE(post.status().message().find("without a response"), std::string::npos) << post.status().ToString();
  EXPECT_EQ(t.stats().retries, 1u);
  EXPECT_EQ(server.accepted(), 2);
  int posts = 0;
  for (const auto& r : server.requests()) posts += r.rfind("POST ", 0) == 0;
  EXPECT_EQ(posts, 1);
}

TEST(BeastTransportTest, SilentServerIsDeadlineExceeded) {
  ScriptedServer server([](int, int, const std::string&) { return ScriptedServer::Action{"", false, /*hold=*/true}; });
  BeastTransport t(PlainConfig(server));
  auto r = t.RoundTrip({"GET", "/slow", "", std::chrono::milliseconds(200)});
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_NE(r.status().message().find("timed out after 200 ms"), std::string::npos) << r.status().ToString();
}

TEST(BeastTransportTest, RefusedConnectionIsUnavailable) {
  int port;
  {
    ScriptedServer gone([](int, int, const std::string&) { return ScriptedServer::Action{}; });
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }
  KubeConfig c;
  c.server = "http://127.0.0.1:" + std::to_string(port);
  auto r = BeastTransport(c).RoundTrip({"GET", "/", "", std::chrono::milliseconds(2000)});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

TEST(BeastTransportTest, AnswerLargerThanTheBodyLimitIsAnErrorNotACrash) {
  // A Content-Length no memory could hold, and one just past the limit.
  const std::vector<std::string> lengths = {"99999999999999999", std::to_string(kMaxResponseBytes + 1)};
  ScriptedServer server([&](int conn, int, const std::string&) {
    return ScriptedServer::Action{"HTTP/1.1 200 OK\r\nContent-Length: " + lengths[conn - 1] + "\r\n\r\n{}", true};
  });
  KubeConfig c;
  c.server = server.url();
  BeastTransport t(c);
  for (size_t i = 0; i < lengths.size(); ++i) {
    auto r = t.RoundTrip({"GET", "/api/v1/nodes", "", std::chrono::milliseconds(5000)});
    ASSERT_FALSE(r.ok()) << lengths[i];
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
    EXPECT_NE(r.status().message().find("larger than"), std::string::npos) << r.status().ToString();
  }
}

// A request's own bound: an answer of 5 MiB to a request that reads at most
// 4 MiB is refused, whether its length is announced or it is chunked, and
// one within the bound arrives whole.
TEST(BeastTransportTest, AnAnswerPastTheRequestsOwnBoundIsRefused) {
  const std::string big(5u << 20, ' ');
  ScriptedServer server([&](int conn, int, const std::string&) {
    if (conn == 1) {
      return ScriptedServer::Action{
          "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(big.size() + 2) + "\r\n\r\n{}" + big, true};
    }
    char head[64];
    std::snprintf(head, sizeof head, "%zx\r\n", big.size() + 2);
    return ScriptedServer::Action{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(head) + "{}" +
                                      big + "\r\n0\r\n\r\n",
                                  true};
  });
  KubeConfig c;
  c.server = server.url();
  BeastTransport t(c);
  for (int i = 0; i < 2; ++i) {
    HttpRequest req{"GET", "/apis/resource.k8s.io/v1/namespaces/a/resourceclaims/b", "",
                    std::chrono::milliseconds(5000), 4u << 20};
    auto r = t.RoundTrip(req);
    ASSERT_FALSE(r.ok()) << i;
    EXPECT_NE(r.status().message().find("larger than 4 MiB, the most this request reads"), std::string::npos)
        << r.status().ToString();
  }
  HttpRequest within{"GET", "/api/v1/pods", "", std::chrono::milliseconds(5000), 8u << 20};
  auto r = t.RoundTrip(within);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body.size(), big.size() + 2);
}

TEST(BeastTransportTest, ServerAddressThatIsNotAUrlIsFailedPrecondition) {
  for (const char* server : {"127.0.0.1:6443", "ftp://host", "https://", "https://host:99999", "https://::1:443"}) {
    KubeConfig c;
    c.server = server;
    auto r = BeastTransport(c).RoundTrip({"GET", "/", "", std::chrono::milliseconds(2000)});
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << server << ": " << r.status().ToString();
  }
}

// A watch: each piece reaches the sink while the server still holds the
// body open, and cancelling from another thread ends the wait.
TEST(BeastTransportTest, WatchPiecesArriveAsSentAndCancelEndsTheWait) {
  const std::string event = "{\"type\":\"ADDED\",\"object\":{}}\n";
  ScriptedServer server([&](int, int, const std::string&) {
    return ScriptedServer::Action{kChunkedHead + Chunk(event), false, /*hold=*/true};
  });
  BeastTransport t(PlainConfig(server));
  Mutex mu;
  CondVar cv;
  std::string got;
  CancelFlag cancel;
  Result<HttpResponse> result = Internal("not run");
  std::thread watcher([&] {
    result = t.Stream(
        {"GET", "/api/v1/nodes?watch=1", "", std::chrono::milliseconds(60'000)},
        [&](std::string_view data) {
          MutexLock l(mu);
          got.append(data);
          cv.NotifyAll();
          return true;
        },
        &cancel);
  });
  {
    MutexLock l(mu);
    cv.Wait(mu, [&]() REQUIRES(mu) { return got.size() >= event.size(); });
  }
  // The cancel wakes the watch at once, not at its backstop poll (2 s):
  // a stopping plugin does not wait on its watches.
  const auto cancelled_at = std::chrono::steady_clock::now();
  cancel.Cancel();
  watcher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, std::chrono::seconds(1));
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_NE(result.status().message().find("cancelled"), std::string::npos) << result.status().ToString();
  EXPECT_EQ(got, event);
  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].find("Content-Type:"), std::string::npos) << "a watch sends no body";
}

TEST(BeastTransportTest, WatchThatBreaksMidBodyIsUnavailable) {
  ScriptedServer server([](int, int, const std::string&) {
    return ScriptedServer::Action{kChunkedHead + Chunk("{\"type\":\"ADDED\"}\n"), /*close=*/true};
  });
  BeastTransport t(PlainConfig(server));
  std::string got;
  CancelFlag cancel;
  auto r = t.Stream(
      {"GET", "/w", "", std::chrono::milliseconds(10'000)},
      [&](std::string_view d) {
        got.append(d);
        return true;
      },
      &cancel);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("stream broke"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(got, "{\"type\":\"ADDED\"}\n");
}

TEST(BeastTransportTest, WatchEndsWhenTheSinkSaysSoOrTheServerEndsTheBody) {
  ScriptedServer server([](int conn, int, const std::string&) {
    if (conn == 1) return ScriptedServer::Action{WithLength("{\"kind\":\"Status\",\"code\":403}", 403)};
    return ScriptedServer::Action{kChunkedHead + Chunk("a\n") + Chunk("b\n") + "0\r\n\r\n"};
  });
  BeastTransport t(PlainConfig(server));
  std::string got;
  auto sink = [&](std::string_view d) {
    got.append(d);
    return true;
  };
  auto denied = t.Stream({"GET", "/w", "", std::chrono::milliseconds(10'000)}, sink, nullptr);
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  EXPECT_EQ(denied->status, 403);
  EXPECT_EQ(denied->body, "{\"kind\":\"Status\",\"code\":403}") << "an error answer comes back whole";
  EXPECT_EQ(got, "");
  auto ended = t.Stream({"GET", "/w", "", std::chrono::milliseconds(10'000)}, sink, nullptr);
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(ended->status, 200);
  EXPECT_EQ(got, "a\nb\n");
  EXPECT_EQ(server.accepted(), 2) << "a watch has a connection of its own";
}

// OpenSSL accepts new allocator functions only until it first allocates,
// which its initialisation does: a probe for "OpenSSL has been used".
bool OpenSslUntouched() {
  CRYPTO_malloc_fn m;
  CRYPTO_realloc_fn r;
  CRYPTO_free_fn f;
  CRYPTO_get_mem_functions(&m, &r, &f);
  return CRYPTO_set_mem_functions(m, r, f) == 1;
}

TEST(BeastTransportTest, PlainHttpNeverInitialisesOpenSsl) {
  if (!OpenSslUntouched()) GTEST_SKIP() << "OpenSSL was used earlier in this process; run this test on its own";
  TestApiServer plain;
  ASSERT_TRUE(plain.ok()) << plain.error();
  ASSERT_TRUE(plain.LoadFile(kApiFixtures + "/core.v1.Node.json").ok());
  BeastTransport t(plain.Config());
  auto r = t.RoundTrip({"GET", "/api/v1/nodes/nameValue", "", std::chrono::milliseconds(5000)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(OpenSslUntouched()) << "an http:// API server made the process initialise OpenSSL";

  // The probe can tell: one https request and OpenSSL is in use.
  TestApiServerOptions o;
  o.tls = true;
  TestApiServer tls(o);
  ASSERT_TRUE(tls.ok()) << tls.error();
  ASSERT_TRUE(BeastTransport(tls.Config()).RoundTrip({"GET", "/healthz", "", std::chrono::milliseconds(5000)}).ok());
  EXPECT_FALSE(OpenSslUntouched());
}

class BeastTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestApiServer(nvdra::testing::ClientCertTlsOptions({kApiFixtures + "/core.v1.Node.json"}));
    ASSERT_TRUE(server_->ok()) << server_->error();
  }
  static void TearDownTestSuite() { delete server_; }
  static Result<HttpResponse> GetNode(BeastTransport& t) {
    return t.RoundTrip({"GET", "/api/v1/nodes/nameValue", "", std::chrono::milliseconds(5000)});
  }
  static TestApiServer* server_;
};
TestApiServer* BeastTlsTest::server_ = nullptr;

TEST_F(BeastTlsTest, ConnectionIsKeptAliveAcrossRequests) {
  KubeConfig c = server_->Config();
  c.token.clear();  // the client certificate authenticates
  BeastTransport t(c);
  for (int i = 0; i < 10; ++i) {
    auto r = GetNode(t);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->status, 200) << r->body;
  }
  EXPECT_EQ(t.stats().connections, 1u);
  EXPECT_EQ(t.stats().reuses, 9u);
}

TEST_F(BeastTlsTest, CaOfAnotherClusterIsFailedPrecondition) {
  TestApiServerOptions o;
  o.tls = true;
  TestApiServer other(o);
  ASSERT_TRUE(other.ok()) << other.error();
  KubeConfig c = server_->Config();
  c.ca_file = other.tls_dir() + "/ca.crt";
  BeastTransport t(c);
  auto r = GetNode(t);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("TLS verification of the API server failed"), std::string::npos);
  EXPECT_NE(r.status().message().find("certificate-authority"), std::string::npos);
  // OpenSSL's reason is kept (both test CAs have one name: the chain fails).
  const std::string& m = r.status().message();
  size_t open = m.find("failed (");
  ASSERT_NE(open, std::string::npos) << m;
  EXPECT_NE(m.substr(open, m.find(')', open) - open).find("certificate"), std::string::npos) << m;
  EXPECT_EQ(t.stats().connections, 0u);
}

TEST_F(BeastTlsTest, UnusableClientCertificateIsFailedPrecondition) {
  KubeConfig c = server_->Config();
  c.client_cert_file = server_->tls_dir() + "/ca.crt";  // not the certificate of client.key
  BeastTransport mismatched(c);
  auto r = GetNode(mismatched);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("client certificate or key cannot be used"), std::string::npos)
      << r.status().ToString();
  c.client_cert_file = server_->dir() + "/missing.crt";
  BeastTransport missing(c);
  r = GetNode(missing);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("missing.crt"), std::string::npos) << r.status().ToString();
}

TEST_F(BeastTlsTest, WatchOverTlsIsCancelledMidStream) {
  BeastTransport t(server_->Config());
  CancelFlag cancel;
  std::string got;
  auto r = t.Stream(
      {"GET", "/api/v1/nodes?watch=1", "", std::chrono::milliseconds(60'000)},
      [&](std::string_view d) {
        got.append(d);
        if (got.find('\n') != std::string::npos) cancel.Cancel();  // the server keeps the watch open
        return true;
      },
      &cancel);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("cancelled"), std::string::npos) << r.status().ToString();
  EXPECT_NE(got.find("\"type\": \"ADDED\""), std::string::npos) << got;
}

// The certificate must name what the URL names: a DNS SAN for a host name,
// an IP SAN for an address.
TEST(BeastTransportTlsNamesTest, HostNameAndAddressAreVerified) {
  TestApiServerOptions o;
  o.tls = true;
  o.tls_names = "DNS:localhost";
  TestApiServer by_name(o);
  ASSERT_TRUE(by_name.ok()) << by_name.error();
  KubeConfig c = by_name.Config();
  const std::string port = c.server.substr(c.server.rfind(':'));
  auto r = BeastTransport(c).RoundTrip({"GET", "/healthz", "", std::chrono::milliseconds(5000)});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("IP address mismatch"), std::string::npos) << r.status().ToString();
  c.server = "https://localhost" + port;
  r = BeastTransport(c).RoundTrip({"GET", "/healthz", "", std::chrono::milliseconds(5000)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);

  o.tls_names = "IP:127.0.0.1,DNS:apiserver.example";
  TestApiServer by_address(o);
  ASSERT_TRUE(by_address.ok()) << by_address.error();
  c = by_address.Config();
  r = BeastTransport(c).RoundTrip({"GET", "/healthz", "", std::chrono::milliseconds(5000)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  c.server = "https://localhost" + c.server.substr(c.server.rfind(':'));
  r = BeastTransport(c).RoundTrip({"GET", "/healthz", "", std::chrono::milliseconds(5000)});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("hostname mismatch"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace nvdra::kube
