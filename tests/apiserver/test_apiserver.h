// A test fixture that runs nvdra_test_apiserver.py as a child process on an
// ephemeral loopback port and talks to its /_nvdra/ control plane. Ready when
// the server prints its URL (no polling); killed in the destructor.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/beast_transport.h"
#include "kube/kube_config.h"
#include "util/file_util.h"
#include "util/status.h"
#include "util/test_temp_dir.h"

namespace nvdra::testing {

struct TestApiServerOptions {
  bool tls = false;
  std::string token;                 // require this bearer token
  bool require_client_cert = false;  // with tls: a client cert (or the token) is required
  std::string tls_names;             // with tls: the server cert's subjectAltName; empty: IP:127.0.0.1,DNS:localhost
  std::string versions;              // resource.k8s.io versions served; empty: all
  std::vector<std::string> load;     // JSON/YAML files loaded at start
  std::string script = NVDRA_TEST_APISERVER;
};

// HTTPS that requires a client certificate (or the bearer token "s3cret"),
// as a cluster's API server does, with `load` loaded at start.
inline TestApiServerOptions ClientCertTlsOptions(std::vector<std::string> load = {}) {
  TestApiServerOptions o;
  o.tls = true;
  o.token = "s3cret";
  o.require_client_cert = true;
  o.load = std::move(load);
  return o;
}

class TestApiServer {
 public:
  explicit TestApiServer(TestApiServerOptions options = {}) : options_(std::move(options)) { Start(); }
  ~TestApiServer() { Kill(); }
  TestApiServer(const TestApiServer&) = delete;
  TestApiServer& operator=(const TestApiServer&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& url() const { return url_; }
  const std::string& dir() const { return dir_.path(); }
  std::string tls_dir() const { return dir() + "/tls"; }
  std::string kubeconfig_path() const { return dir() + "/kubeconfig"; }

  // A config with full access: the generated CA and client cert, or the token.
  kube::KubeConfig Config() const {
    kube::KubeConfig c;
    c.server = url_;
    if (options_.tls) {
      c.ca_file = tls_dir() + "/ca.crt";
      c.client_cert_file = tls_dir() + "/client.crt";
      c.client_key_file = tls_dir() + "/client.key";
    }
    c.token = options_.token;
    return c;
  }

  // POST /_nvdra/<what> with a JSON body; the JSON answer.
  Result<nlohmann::json> Control(const std::string& what, const nlohmann::json& body = nlohmann::json::object()) {
    if (!control_) control_ = std::make_unique<kube::BeastTransport>(Config());
    auto r = control_->RoundTrip({"POST", "/_nvdra/" + what, body.dump(), std::chrono::milliseconds(10'000)});
    if (!r.ok()) return r.status();
    if (r->status != 200) return Internal("control " + what + ": HTTP " + std::to_string(r->status) + " " + r->body);
    return nlohmann::json::parse(r->body);
  }
  Status LoadFile(const std::string& path) { return Control("load", {{"path", path}}).status(); }
  Status LoadObject(const nlohmann::json& object) {
    return Control("load", {{"objects", nlohmann::json::array({object})}}).status();
  }
  Status DeleteObject(const std::string& resource, const std::string& ns, const std::string& name) {
    return Control("delete", {{"resource", resource}, {"namespace", ns}, {"name", name}}).status();
  }
  // Deletes and recreates the object under the same name; returns the new UID.
  Result<std::string> Replace(const std::string& resource, const std::string& ns, const std::string& name) {
    NVDRA_ASSIGN_OR_RETURN(auto j, Control("replace", {{"resource", resource}, {"namespace", ns}, {"name", name}}));
    return j["uid"].get<std::string>();
  }
  // rule: {"status": 429|500, "retry_after": s or "text", "latency_ms": ms, "drop": true,
  //        "raw_body": "text sent as is (status default 200)",
  //        "count": n (-1 forever), "path_prefix": "/apis/...", "method": "PUT"}
  Status InjectFault(const nlohmann::json& rule) {
    return Control("faults", {{"rules", nlohmann::json::array({rule})}}).status();
  }
  Status ClearFaults() { return Control("faults", {{"clear", true}}).status(); }
  Status SetVersions(const std::vector<std::string>& versions) {
    return Control("versions", {{"versions", versions}}).status();
  }
  // The API requests served so far: [{method, path, query}].
  Result<nlohmann::json> Requests(bool clear = false) {
    NVDRA_ASSIGN_OR_RETURN(auto j, Control("requests", {{"clear", clear}}));
    return j["requests"];
  }
  // API requests per verb and resource so far, e.g. counts["list"]["computedomains"].
  Result<nlohmann::json> Counts(bool clear = false) {
    NVDRA_ASSIGN_OR_RETURN(auto j, Control("counts", {{"clear", clear}}));
    return j["counts"];
  }
  // How many `verb` requests of `resource` were served (0 when none).
  Result<int> Count(const std::string& verb, const std::string& resource) {
    NVDRA_ASSIGN_OR_RETURN(auto c, Counts());
    if (!c.contains(verb) || !c[verb].contains(resource)) return 0;
    return c[verb][resource].get<int>();
  }
  // Acts on open watch streams: "drop" (abrupt close), "expire" (ERROR 410
  // event), "end" (clean end); resource "" means all. Returns how many.
  Result<int> WatchAction(const std::string& action, const std::string& resource = "") {
    NVDRA_ASSIGN_OR_RETURN(auto j, Control("watches", {{"action", action}, {"resource", resource}}));
    return j["affected"].get<int>();
  }
  // Open watch streams of `resource`.
  Result<int> OpenWatches(const std::string& resource) {
    NVDRA_ASSIGN_OR_RETURN(auto j, Control("watches"));
    int n = 0;
    for (const auto& w : j["active"]) n += w["resource"] == resource;
    return n;
  }
  // Waits (bounded) until `n` watch streams of `resource` are open: a closed
  // or dropped watch's connection ends a moment after the call that closed it.
  bool OpenWatchesReach(const std::string& resource, int n,
                        std::chrono::steady_clock::duration timeout = std::chrono::seconds(15)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto open = OpenWatches(resource);
      if (open.ok() && *open == n) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the server tells no one; ask again
    }
  }
  // Forgets the watch history: resuming from an older resourceVersion gets 410.
  Status CompactWatchHistory() { return Control("watches", {{"compact", true}}).status(); }
  Status SetBookmarkInterval(double seconds) { return Control("watches", {{"bookmark_interval", seconds}}).status(); }
  // Stored objects (storage shape) of one resource, e.g. "resourceslices".
  Result<nlohmann::json> Objects(const std::string& resource) {
    NVDRA_ASSIGN_OR_RETURN(auto j, Control("objects", {{"resource", resource}}));
    return j["items"];
  }

 private:
  void Start() {
    std::vector<std::string> args = {"python3",     options_.script, "--port",           "0",
                                     "--port-file", dir() + "/port", "--kubeconfig-out", kubeconfig_path()};
    if (options_.tls) args.insert(args.end(), {"--tls-dir", tls_dir()});
    if (!options_.token.empty()) args.insert(args.end(), {"--token", options_.token});
    if (options_.require_client_cert) args.push_back("--require-client-cert");
    if (!options_.tls_names.empty()) args.insert(args.end(), {"--tls-names", options_.tls_names});
    if (!options_.versions.empty()) args.insert(args.end(), {"--versions", options_.versions});
    for (const auto& f : options_.load) args.insert(args.end(), {"--load", f});
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      error_ = "pipe failed";
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("python3", argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    // Wait for "READY <url>\n" (the server prints it once listening).
    std::string line;
    pollfd p{fds[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos) {
      if (::poll(&p, 1, 30'000) <= 0) {
        error_ = "test API server did not become ready within 30 s";
        break;
      }
      char buf[256];
      ssize_t n = ::read(fds[0], buf, sizeof(buf));
      if (n <= 0) {
        error_ = "test API server exited before becoming ready";
        break;
      }
      line.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    if (error_.empty()) {
      if (line.rfind("READY ", 0) != 0) {
        error_ = "unexpected first line from test API server: " + line;
      } else {
        url_ = line.substr(6, line.find('\n') - 6);
      }
    }
  }

  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
    }
  }

  TestApiServerOptions options_;
  TempDir dir_{"nvdra-apiserver"};
  pid_t pid_ = -1;
  std::string url_;
  std::string error_;
  std::unique_ptr<kube::BeastTransport> control_;
};

}  // namespace nvdra::testing
