// nvdra-webhook's HTTPS server with a certificate made here: AdmissionReview
// bodies over TLS as the API server sends them, and clients that misbehave
// (plain HTTP, huge or malformed requests, slow senders), after which the
// server still answers.
#include "admission/webhook_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <csignal>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "admission/certificate_reloader.h"
#include "admission/webhook_routes.h"
#include "cmd/config_kinds/config_kinds.h"
#include "util/mutex.h"
#include "util/test_temp_dir.h"

namespace nvdra::admission {
namespace {

// nvdra's config kinds, registered as nvdra-webhook registers them at start.
[[maybe_unused]] const bool kServerTestKinds = RegisterNvdraConfigKinds().ok();

using nlohmann::json;

struct Deleter {
  void operator()(X509* x) const { X509_free(x); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
  void operator()(SSL* s) const { SSL_free(s); }
};
template <typename T>
using Owned = std::unique_ptr<T, Deleter>;

// Holds the requests a test's handler is given in the handler until the
// test opens it, and tells the test how many are held.
class HandlerLatch {
 public:
  void Enter() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++inside_;
    cv_.NotifyAll();
    cv_.Wait(mu_, [&]() REQUIRES(mu_) { return open_; });
  }
  void WaitInside(int n) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [&]() REQUIRES(mu_) { return inside_ >= n; });
  }
  void Open() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    open_ = true;
    cv_.NotifyAll();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int inside_ GUARDED_BY(mu_) = 0;
  bool open_ GUARDED_BY(mu_) = false;
};

// A self-signed certificate for 127.0.0.1 and localhost.
struct Cert {
  Owned<EVP_PKEY> key;
  Owned<X509> cert;
  long serial = 0;
};

Cert MakeCert(long serial) {
  Cert c;
  c.serial = serial;
  c.key.reset(EVP_EC_gen("P-256"));
  if (!c.key) throw std::runtime_error("EVP_EC_gen failed");
  c.cert.reset(X509_new());
  X509* x = c.cert.get();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, c.key.get());
  X509_NAME* name = X509_get_subject_name(x);
  // Distinct names, so a client trusting several finds each one's issuer.
  const std::string cn = "nvdra-webhook.test-" + std::to_string(serial);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  X509_add_ext(x, san, -1);
  X509_EXTENSION_free(san);
  if (X509_sign(x, c.key.get(), EVP_sha256()) == 0) throw std::runtime_error("X509_sign failed");
  return c;
}

// Writes the certificate and key as PEM: to a new file renamed over `path`,
// as a Secret volume replaces its files.
void WritePem(const Cert& c, const std::string& cert_path, const std::string& key_path) {
  for (bool is_key : {false, true}) {
    std::string path = is_key ? key_path : cert_path;
    std::string tmp = path + ".new";
    FILE* f = std::fopen(tmp.c_str(), "w");
    ASSERT_NE(f, nullptr);
    int ok = is_key ? PEM_write_PrivateKey(f, c.key.get(), nullptr, nullptr, 0, nullptr, nullptr)
                    : PEM_write_X509(f, c.cert.get());
    std::fclose(f);
    ASSERT_EQ(ok, 1);
    std::filesystem::rename(tmp, path);
  }
}

struct Reply {
  bool connected = false;
  std::string raw;  // everything read until the server closed
  long peer_serial = -1;
  int status() const {
    if (raw.rfind("HTTP/1.1 ", 0) != 0) return 0;
    return std::stoi(raw.substr(9, 3));
  }
  std::string body() const {
    size_t p = raw.find("\r\n\r\n");
    return p == std::string::npos ? "" : raw.substr(p + 4);
  }
  std::string header(const std::string& name) const {
    size_t p = raw.find("\r\n" + name + ": ");
    if (p == std::string::npos) return "";
    p += name.size() + 4;
    return raw.substr(p, raw.find("\r\n", p) - p);
  }
};

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{10, 0};  // a hung server fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A TLS client that trusts `trusted` and checks the server's name is
// 127.0.0.1: sends `request` as is and reads until the server closes.
class TlsClient {
 public:
  TlsClient(int port, const std::vector<const Cert*>& trusted) {
    // A server that closes while we still write must fail the write, not
    // kill the test binary.
    std::signal(SIGPIPE, SIG_IGN);
    ctx_.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_verify(ctx_.get(), SSL_VERIFY_PEER, nullptr);
    for (const Cert* c : trusted) X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx_.get()), c->cert.get());
    fd_ = Connect(port);
    if (fd_ < 0) return;
    ssl_.reset(SSL_new(ctx_.get()));
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), "127.0.0.1");
    SSL_set_fd(ssl_.get(), fd_);
    connected_ = SSL_connect(ssl_.get()) == 1;
    ERR_clear_error();
  }
  ~TlsClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }

  bool Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      int n = SSL_write(ssl_.get(), data.data() + sent,
                        static_cast<int>(std::min<size_t>(data.size() - sent, 1 << 20)));
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until the server closes or errors; `timed_out` when the socket's
  // own 10 s limit ended it.
  std::string ReadAll(bool* timed_out = nullptr) {
    std::string out;
    char buf[16384];
    for (;;) {
      int n = SSL_read(ssl_.get(), buf, sizeof(buf));
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (timed_out)
        *timed_out = SSL_get_error(ssl_.get(), n) == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK);
      ERR_clear_error();
      return out;
    }
  }
  long PeerSerial() const {
    X509* peer = SSL_get1_peer_certificate(ssl_.get());
    if (peer == nullptr) return -1;
    long s = ASN1_INTEGER_get(X509_get_serialNumber(peer));
    X509_free(peer);
    return s;
  }

 private:
  Owned<SSL_CTX> ctx_;
  Owned<SSL> ssl_;
  int fd_ = -1;
  bool connected_ = false;
};

std::string Post(const std::string& path, const std::string& body,
                 const std::string& content_type = "application/json") {
  return "POST " + path + " HTTP/1.1\r\nHost: nvdra-webhook.nvdra.svc:443\r\nContent-Type: " + content_type +
         "\r\nAccept: application/json, */*\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

std::string Get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"; }

// A v1 ResourceClaim with one GpuConfig whose time-slice interval is `interval`.
std::string ClaimReview(const std::string& interval, const std::string& padding = "") {
  json params = {{"apiVersion", "resource.nvidia.com/v1beta1"},
                 {"kind", "GpuConfig"},
                 {"sharing", {{"strategy", "TimeSlicing"}, {"timeSlicingConfig", {{"interval", interval}}}}}};
  json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", "ts"}, {"namespace", "default"}, {"annotations", {{"pad", padding}}}}},
      {"spec",
       {{"devices",
         {{"requests", {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}}},
          {"config",
           {{{"requests", {"gpu"}}, {"opaque", {{"driver", "gpu.nvidia.com"}, {"parameters", params}}}}}}}}}}};
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "3e0c5b5e-0f1c-4d7b-9b5e-2b1f9d1c0a11"},
                   {"resource", {{"group", "resource.k8s.io"}, {"version", "v1"}, {"resource", "resourceclaims"}}},
                   {"operation", "CREATE"},
                   {"object", claim}}}};
  return review.dump();
}

class WebhookServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cert_path_ = dir_.path() + "/tls.crt";
    key_path_ = dir_.path() + "/tls.key";
    WritePem(first_, cert_path_, key_path_);
  }

  // The defaults, but on a free loopback port; `change` adjusts them.
  void StartServer(const std::function<void(WebhookServerOptions&)>& change = nullptr, HttpHandler handler = nullptr) {
    WebhookServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.cert_file = cert_path_;
    o.key_file = key_path_;
    if (change) change(o);
    auto gates = config::FeatureGates().With(config::Gate::kTimeSlicingSettings, true);
    if (!handler) handler = [gates](const HttpRequest& r) { return ServeWebhook(r, gates); };
    auto s = WebhookServer::Start(o, std::move(handler));
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(s).value();
  }

  // The serial of the certificate new connections get, once it is `want`
  // (the files are read again off the connection's path, so a change shows
  // on a later connection); the last one seen when that takes too long.
  long ServedSerialOnceItIs(long want, const std::vector<const Cert*>& trusted) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    long seen = -1;
    while (std::chrono::steady_clock::now() < deadline) {
      Reply r = Exchange(Get("/readyz"), trusted);
      EXPECT_EQ(r.status(), 200) << r.raw;
      seen = r.peer_serial;
      if (seen == want) break;
    }
    return seen;
  }

  Reply Exchange(const std::string& request, const std::vector<const Cert*>& trusted = {}) {
    std::vector<const Cert*> t = trusted.empty() ? std::vector<const Cert*>{&first_} : trusted;
    TlsClient c(server_->port(), t);
    Reply r;
    r.connected = c.connected();
    if (!r.connected) return r;
    r.peer_serial = c.PeerSerial();
    if (c.Send(request)) r.raw = c.ReadAll();
    return r;
  }

  // Requests to /slow wait in the handler for latch_; the rest are served.
  void StartServerWithSlowPath(const std::function<void(WebhookServerOptions&)>& change = nullptr) {
    auto gates = config::FeatureGates().With(config::Gate::kTimeSlicingSettings, true);
    StartServer(change, [this, gates](const HttpRequest& r) {
      if (r.target != "/slow") return ServeWebhook(r, gates);
      latch_.Enter();
      return HttpAnswer{200, "text/plain; charset=utf-8", "slow " + std::to_string(r.body.size())};
    });
  }
  void TearDown() override {
    latch_.Open();  // no handler may hold the server's workers past the test
    server_.reset();
  }

  void ExpectStillServing() {
    Reply r = Exchange(Get("/readyz"));
    EXPECT_EQ(r.status(), 200) << r.raw;
    EXPECT_EQ(r.body(), "ok");
  }

  nvdra::testing::TempDir dir_{"nvdra-webhook"};
  std::string cert_path_, key_path_;
  Cert first_ = MakeCert(1001);
  HandlerLatch latch_;
  std::unique_ptr<WebhookServer> server_;
};

TEST_F(WebhookServerTest, AnAdmissionReviewOverTlsIsAnsweredWithTheDecision) {
  StartServer();
  Reply ok = Exchange(Post("/validate-resource-claim-parameters", ClaimReview("Long")));
  ASSERT_TRUE(ok.connected);
  ASSERT_EQ(ok.status(), 200) << ok.raw;
  EXPECT_EQ(ok.header("Content-Type"), "application/json");
  json answer = json::parse(ok.body());
  EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(answer["kind"], "AdmissionReview");
  EXPECT_EQ(answer["response"], json({{"uid", "3e0c5b5e-0f1c-4d7b-9b5e-2b1f9d1c0a11"}, {"allowed", true}}));

  Reply bad = Exchange(Post("/validate-resource-claim-parameters", ClaimReview("Sometimes")));
  ASSERT_EQ(bad.status(), 200) << bad.raw;
  json refused = json::parse(bad.body());
  EXPECT_EQ(refused["response"]["allowed"], false);
  EXPECT_EQ(refused["response"]["status"]["reason"], "Invalid");
  EXPECT_EQ(refused["response"]["status"]["message"],
            "1 configs failed to validate: object at spec.devices.config[0].opaque.parameters is invalid: unknown "
            "time-slice interval: Sometimes, supported time-slice intervals: Default, Short, Medium, Long");
}

TEST_F(WebhookServerTest, ReadyzAndUnknownPathsAnswerAsUpstreams) {
  StartServer();
  ExpectStillServing();
  Reply missing = Exchange(Get("/metrics"));
  EXPECT_EQ(missing.status(), 404);
  EXPECT_EQ(missing.body(), "404 page not found\n");
  Reply wrong_type = Exchange(Post("/validate-resource-claim-parameters", ClaimReview("Long"), "text/yaml"));
  EXPECT_EQ(wrong_type.status(), 415);
  EXPECT_EQ(wrong_type.body(), "contentType=text/yaml, expected application/json\n");
  Reply not_json = Exchange(Post("/validate-resource-claim-parameters", "{{{{"));
  EXPECT_EQ(not_json.status(), 400);
  EXPECT_EQ(not_json.body().rfind("failed to read AdmissionReview from request body: request could not be decoded", 0),
            0u)
      << not_json.raw;
}

TEST_F(WebhookServerTest, OneConnectionCarriesSeveralRequests) {
  StartServer();
  TlsClient c(server_->port(), {&first_});
  ASSERT_TRUE(c.connected());
  std::string body = ClaimReview("Short");
  std::string keep = "POST /validate-resource-claim-parameters HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_TRUE(c.Send(keep + keep + Get("/readyz")));
  std::string all = c.ReadAll();
  size_t answers = 0;
  for (size_t p = 0; (p = all.find("HTTP/1.1 200 OK\r\n", p)) != std::string::npos; ++p) ++answers;
  EXPECT_EQ(answers, 3u) << all;
}

TEST_F(WebhookServerTest, ALargeReviewWithinTheLimitIsJudged) {
  StartServer();
  Reply r = Exchange(Post("/validate-resource-claim-parameters", ClaimReview("Medium", std::string(3'000'000, 'x'))));
  ASSERT_EQ(r.status(), 200) << r.raw.substr(0, 300);
  EXPECT_EQ(json::parse(r.body())["response"]["allowed"], true);
}

// The API server sends at most 3 MiB; so much is judged, a byte more is not.
TEST_F(WebhookServerTest, TheBodyLimitIsTheApiServersThreeMebibytes) {
  StartServer();
  std::string review = ClaimReview("Short");
  std::string at_limit = review.substr(0, review.size() - 1) + std::string((3u << 20) - review.size(), ' ') + "}";
  ASSERT_EQ(at_limit.size(), 3u << 20);
  Reply ok = Exchange(Post("/validate-resource-claim-parameters", at_limit));
  ASSERT_EQ(ok.status(), 200) << ok.raw.substr(0, 300);
  EXPECT_EQ(json::parse(ok.body())["response"]["allowed"], true);
  // Refused from the Content-Length: the client need not send the body
  // (the server reads no more than 1 MiB of it before it closes).
  std::string over_request = Post("/validate-resource-claim-parameters", at_limit + " ");
  Reply over = Exchange(over_request.substr(0, over_request.find("\r\n\r\n") + 5));
  EXPECT_EQ(over.status(), 413) << over.raw.substr(0, 300);
  EXPECT_EQ(over.body(), "request body larger than 3145728 bytes\n");
}

TEST_F(WebhookServerTest, ABodyOverTheLimitIsRefusedFromItsLengthBeforeItIsRead) {
  StartServer();
  std::string head = "POST /validate-resource-claim-parameters HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     "application/json\r\nContent-Length: " +
                     std::to_string(1u << 30) + "\r\n\r\n{";
  Reply r = Exchange(head);
  EXPECT_EQ(r.status(), 413) << r.raw;
  EXPECT_NE(r.body().find("request body larger than"), std::string::npos);
  ExpectStillServing();
}

TEST_F(WebhookServerTest, AHugeHeadAndAMalformedRequestAreRefused) {
  StartServer();
  Reply big = Exchange("GET /readyz HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(64 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(big.status(), 431) << big.raw.substr(0, 200);
  Reply garbage = Exchange("\x01\x02 nonsense \r\n\r\n");
  EXPECT_EQ(garbage.status(), 400) << garbage.raw;
  Reply bad_length = Exchange("POST /validate-resource-claim-parameters HTTP/1.1\r\nContent-Length: -5\r\n\r\n");
  EXPECT_EQ(bad_length.status(), 400) << bad_length.raw;
  ExpectStillServing();
}

TEST_F(WebhookServerTest, PlainHttpAndUntrustingClientsGetNoAnswerAndTheServerGoesOn) {
  StartServer();
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  std::string req = Get("/readyz");
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(got.find("HTTP/1.1 200"), std::string::npos) << got;

  // A client that trusts another certificate refuses the handshake.
  Cert other = MakeCert(7);
  Reply untrusted = Exchange(Get("/readyz"), {&other});
  EXPECT_FALSE(untrusted.connected);
  ExpectStillServing();
}

TEST_F(WebhookServerTest, AClientThatStopsMidRequestIsCutOffAtTheTimeout) {
  StartServer([](WebhookServerOptions& o) { o.body_timeout = std::chrono::milliseconds(300); });
  TlsClient c(server_->port(), {&first_});
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send("POST /validate-resource-claim-parameters HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"));
  auto start = std::chrono::steady_clock::now();
  bool timed_out = true;
  std::string got = c.ReadAll(&timed_out);
  EXPECT_FALSE(timed_out) << "the server did not close the connection within the client's 10 s";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(got.find("HTTP/1.1 200"), std::string::npos);
  ExpectStillServing();
}

// Connections that send nothing once filled the cap, and every new one was
// closed at once: now the one that waited longest for a request makes room.
TEST_F(WebhookServerTest, AtTheCapTheIdleConnectionThatWaitedLongestIsClosedFirst) {
  StartServer([](WebhookServerOptions& o) { o.max_connections = 8; });
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(Connect(server_->port()));
  for (int fd : idle) ASSERT_GE(fd, 0);
  Reply r = Exchange(Post("/validate-resource-claim-parameters", ClaimReview("Long")));
  ASSERT_TRUE(r.connected);
  EXPECT_EQ(r.status(), 200) << r.raw;
  // The first idle connection was closed to make room (recv sees the end,
  // not the client's 10 s timeout); the last still stands.
  char byte;
  EXPECT_EQ(::recv(idle.front(), &byte, 1, 0), 0);
  EXPECT_EQ(::recv(idle.back(), &byte, 1, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
  for (int fd : idle) ::close(fd);
}

// Connections with a request in work are never closed to make room: with
// all of them busy, a new connection is the one closed.
TEST_F(WebhookServerTest, AtTheCapWithEveryConnectionBusyANewOneIsClosed) {
  StartServerWithSlowPath([](WebhookServerOptions& o) { o.max_connections = 2; });
  Reply slow[2];
  std::vector<std::thread> clients;
  for (Reply& r : slow) clients.emplace_back([this, &r] { r = Exchange(Post("/slow", "{}")); });
  latch_.WaitInside(2);
  TlsClient refused(server_->port(), {&first_});
  EXPECT_FALSE(refused.connected());
  latch_.Open();
  for (auto& c : clients) c.join();
  for (Reply& r : slow) EXPECT_EQ(r.body(), "slow 2");
  ExpectStillServing();
}

// Handlers run on workers, not on the threads that read and write: a
// request in work for long delays no other.
TEST_F(WebhookServerTest, SlowRequestsDelayNoOther) {
  StartServerWithSlowPath([](WebhookServerOptions& o) {
    o.io_threads = 2;
    o.workers = 4;
  });
  Reply slow[3];
  std::vector<std::thread> clients;
  for (Reply& r : slow) clients.emplace_back([this, &r] { r = Exchange(Post("/slow", "{}")); });
  latch_.WaitInside(3);
  Reply ok = Exchange(Post("/validate-resource-claim-parameters", ClaimReview("Long")));
  EXPECT_EQ(ok.status(), 200) << ok.raw;
  EXPECT_EQ(json::parse(ok.body())["response"]["allowed"], true);
  latch_.Open();
  for (auto& c : clients) c.join();
  for (Reply& r : slow) EXPECT_EQ(r.status(), 200) << r.raw;
}

// The bodies held at once, all connections together, are bounded: while
// one body of 1 MiB is in work, a second does not fit 1.5 MiB and is
// refused with 503; once the first is answered, there is room again.
TEST_F(WebhookServerTest, BodiesHeldAtOnceAreBoundedAcrossConnections) {
  StartServerWithSlowPath([](WebhookServerOptions& o) {
    o.max_body_bytes = 1u << 20;
    o.max_buffered_bytes = (3u << 20) / 2;
  });
  const std::string mib(1u << 20, ' ');
  Reply first;
  std::thread client([&] { first = Exchange(Post("/slow", mib)); });
  latch_.WaitInside(1);
  Reply second = Exchange(Post("/slow", mib));
  EXPECT_EQ(second.status(), 503) << second.raw.substr(0, 300);
  EXPECT_EQ(second.body(), "too many request bodies in flight; try again\n");
  latch_.Open();
  client.join();
  EXPECT_EQ(first.body(), "slow 1048576");
  Reply third = Exchange(Post("/slow", mib));
  EXPECT_EQ(third.body(), "slow 1048576");
}

// A client that opens a connection and sends nothing, or half a head, is
// closed once the head's time is up, and does not wait for the body's.
TEST_F(WebhookServerTest, AHeadThatDoesNotArriveIsCutOffAtTheHeadTimeout) {
  StartServer([](WebhookServerOptions& o) { o.head_timeout = std::chrono::milliseconds(300); });
  int silent = Connect(server_->port());
  ASSERT_GE(silent, 0);
  char byte;
  EXPECT_EQ(::recv(silent, &byte, 1, 0), 0) << "the server did not close within the client's 10 s";
  ::close(silent);
  TlsClient half(server_->port(), {&first_});
  ASSERT_TRUE(half.connected());
  ASSERT_TRUE(half.Send("POST /validate-resource-claim-parameters HTTP/1.1\r\nHost: x\r\n"));
  bool timed_out = true;
  EXPECT_EQ(half.ReadAll(&timed_out), "");
  EXPECT_FALSE(timed_out) << "the server did not close within the client's 10 s";
  ExpectStillServing();
}

TEST_F(WebhookServerTest, ARenewedCertificateIsServedWithoutARestart) {
  StartServer();
  Reply before = Exchange(Get("/readyz"));
  EXPECT_EQ(before.peer_serial, 1001);
  Cert renewed = MakeCert(1002);
  WritePem(renewed, cert_path_, key_path_);
  EXPECT_EQ(ServedSerialOnceItIs(1002, {&first_, &renewed}), 1002);

  // A broken renewal keeps the last good certificate.
  std::ofstream(cert_path_) << "not a certificate";
  for (int i = 0; i < 3; ++i) {
    Reply kept = Exchange(Get("/readyz"), {&first_, &renewed});
    EXPECT_EQ(kept.peer_serial, 1002);
    EXPECT_EQ(kept.status(), 200);
  }
}

// A FIFO at the certificate's path (or a file system that hangs) once
// blocked the thread that accepts connections, for good. Now it is refused
// without blocking, the last good certificate is served meanwhile, and a
// good one written after it is picked up.
TEST_F(WebhookServerTest, AFifoAtTheCertificatePathStallsNothing) {
  StartServer();
  const std::string fifo = dir_.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::rename(fifo, cert_path_);
  Cert renewed = MakeCert(1002);
  for (int i = 0; i < 3; ++i) {
    Reply r = Exchange(Post("/validate-resource-claim-parameters", ClaimReview("Long")));
    ASSERT_TRUE(r.connected);
    EXPECT_EQ(r.status(), 200) << r.raw;
    EXPECT_EQ(r.peer_serial, 1001);
  }
  WritePem(renewed, cert_path_, key_path_);
  EXPECT_EQ(ServedSerialOnceItIs(1002, {&first_, &renewed}), 1002);
}

TEST_F(WebhookServerTest, ReadRegularFileRefusesFifosDevicesAndHugeFiles) {
  const std::string fifo = dir_.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = ReadRegularFile(fifo, 1024);
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_EQ(from_fifo.status().message(), "not a regular file");
  auto from_device = ReadRegularFile("/dev/zero", 1024);
  ASSERT_FALSE(from_device.ok());
  EXPECT_EQ(from_device.status().message(), "not a regular file");
  const std::string big = dir_.path() + "/big";
  std::ofstream(big) << std::string(1025, 'x');
  EXPECT_EQ(ReadRegularFile(big, 1024).status().message(), "larger than 1024 bytes");
  EXPECT_EQ(*ReadRegularFile(big, 1025), std::string(1025, 'x'));
}

TEST_F(WebhookServerTest, StartRefusesMissingFilesAndAKeyOfAnotherCertificate) {
  WebhookServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.cert_file = dir_.path() + "/missing.crt";
  o.key_file = key_path_;
  auto handler = [](const HttpRequest&) { return HttpAnswer{}; };
  auto missing = WebhookServer::Start(o, handler);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--tls-cert-file " + o.cert_file), std::string::npos)
      << missing.status().message();

  Cert other = MakeCert(5);
  std::string other_cert = dir_.path() + "/other.crt", other_key = dir_.path() + "/other.key";
  WritePem(other, other_cert, other_key);
  o.cert_file = cert_path_;
  o.key_file = other_key;
  auto mismatch = WebhookServer::Start(o, handler);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("does not match the certificate"), std::string::npos)
      << mismatch.status().message();
}

}  // namespace
}  // namespace nvdra::admission
