// nvdractl cycle / wait-info: measure a plugin over the real socket.
// `cycle` prepares and unprepares claims as the kubelet does for short-lived
// pods, over one held gRPC connection (as the kubelet holds one), one claim
// at a time or in waves of concurrent claims, and reports the latency of each
// call and the claims per second. `wait-info` polls the registration socket
// until GetInfo answers and prints when it did, so a caller can time a
// plugin's start. For measuring a node, not for production traffic.
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <functional>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cmd/nvdractl/commands.h"
#include "kubelet/plugin_client.h"

namespace nvdra::ctl {
namespace {

struct CycleArgs {
  std::string socket;
  std::vector<std::string> claims;
  int concurrency = 1;
  int batch = 1;
  bool prepare_only = false;
  bool unprepare_only = false;
  bool samples = false;
  int pause_us = 0;
  int hold_after = 0;
};

nlohmann::json Summary(std::vector<double> ms) {
  if (ms.empty()) return nullptr;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))]; };
  double sum = 0;
  for (double m : ms) sum += m;
  return {{"count", ms.size()}, {"p50", at(0.50)},  {"p90", at(0.90)},
          {"p99", at(0.99)},    {"max", ms.back()}, {"mean", sum / static_cast<double>(ms.size())}};
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string Name(const kubelet::ClaimRef& c) { return c.ns + "/" + c.name + "/" + c.uid; }

// One call's claims and what it measured.
struct Call {
  std::vector<kubelet::ClaimRef> claims;
  double prepare_ms = -1;
  double unprepare_ms = -1;
  std::vector<std::string> errors;
};

// Idle before a call, outside its latency: a kubelet's calls come between
// other work, and on some machines a round trip that follows an idle
// stretch costs more than one right after the last.
void Pause(std::chrono::microseconds pause) {
  if (pause.count() > 0) std::this_thread::sleep_for(pause);
}

void RunPrepare(const kubelet::PluginClient& client, Call& call, std::chrono::microseconds pause) {
  Pause(pause);
  auto t0 = std::chrono::steady_clock::now();
  auto p = client.Prepare(kubelet::DraApi::kV1, call.claims, std::chrono::seconds(45));
  call.prepare_ms = MsSince(t0);
  if (!p.ok()) {
    call.errors.push_back("prepare: " + p.status().message());
    std::string hint = UnimplementedHint(p.status().message(), client.socket_path(), Surface::kDra, "v1");
    if (!hint.empty()) call.errors.push_back("hint: " + hint);
    return;
  }
  for (const auto& c : call.claims) {
    auto it = p->find(c.uid);
    if (it == p->end()) call.errors.push_back(Name(c) + ": missing from the prepare answer");
    else if (!it->second.error.empty()) call.errors.push_back(Name(c) + ": " + it->second.error);
  }
}

void RunUnprepare(const kubelet::PluginClient& client, Call& call, std::chrono::microseconds pause) {
  Pause(pause);
  auto t0 = std::chrono::steady_clock::now();
  auto u = client.Unprepare(kubelet::DraApi::kV1, call.claims, std::chrono::seconds(45));
  call.unprepare_ms = MsSince(t0);
  if (!u.ok()) {
    call.errors.push_back("unprepare: " + u.status().message());
    return;
  }
  for (const auto& c : call.claims) {
    auto it = u->find(c.uid);
    if (it != u->end() && !it->second.empty()) call.errors.push_back(Name(c) + ": " + it->second);
  }
}

// Runs a step on every call of a wave at once, one thread per call in
// flight, the way the kubelet prepares the claims of pods that start
// together. The threads live for the whole run, as the kubelet's goroutines
// are cheap: a thread started and joined per call and wave cost the client
// more CPU than its calls did, CPU the plugin under test then lacked.
class Waves {
 public:
  using Step = std::function<void(Call&)>;

  // No threads for one call at a time: the calling thread runs it.
  explicit Waves(int width) : start_(width + 1), end_(width + 1) {
    if (width <= 1) return;
    for (int i = 0; i < width; ++i) threads_.emplace_back([this, i] { Loop(static_cast<size_t>(i)); });
  }
  ~Waves() {
    if (threads_.empty()) return;
    stop_ = true;
    start_.arrive_and_wait();
    for (auto& t : threads_) t.join();
  }
  Waves(const Waves&) = delete;
  Waves& operator=(const Waves&) = delete;

  // Returns once every call of `wave` (at most `width` of them) is done.
  void Run(std::vector<Call>& wave, Step step) {
    if (threads_.empty()) {
      for (auto& call : wave) step(call);
      return;
    }
    wave_ = &wave;
    step_ = std::move(step);
    start_.arrive_and_wait();  // what was set above happens before the threads read it
    end_.arrive_and_wait();    // and what they wrote before this returns
  }

 private:
  void Loop(size_t i) {
    while (true) {
      start_.arrive_and_wait();
      if (stop_) return;
      if (i < wave_->size()) step_((*wave_)[i]);
      end_.arrive_and_wait();
    }
  }

  std::barrier<> start_;
  std::barrier<> end_;
  std::vector<std::thread> threads_;
  std::vector<Call>* wave_ = nullptr;
  Step step_;
  bool stop_ = false;  // written before the start barrier, read after it
};

// Tells the caller on stderr that the warm-up is done and blocks until it
// writes a line on stdin: a profiler can start counting there, with the
// connection and the plugin's caches as the measured calls find them.
void HoldUntilReleased() {
  std::cerr << "held" << std::endl;
  std::string line;
  std::getline(std::cin, line);
}

int RunCycle(const CycleArgs& args) {
  auto claims = ParseClaimRefs(args.claims);
  if (!claims) return 2;
  kubelet::PluginClient client(args.socket, kubelet::PluginClient::Connection::kHold);
  std::vector<Call> calls;
  for (size_t i = 0; i < claims->size(); i += args.batch) {
    Call c;
    c.claims.assign(claims->begin() + i,
                    claims->begin() + std::min(claims->size(), i + static_cast<size_t>(args.batch)));
    calls.push_back(std::move(c));
  }
  std::vector<double> prep, unprep, waves;
  nlohmann::json errors = nlohmann::json::array();
  double total_ms = 0;
  Waves together(static_cast<int>(std::min(calls.size(), static_cast<size_t>(args.concurrency))));
  const auto pause = std::chrono::microseconds(args.pause_us);
  for (size_t i = 0; i < calls.size(); i += args.concurrency) {
    std::vector<Call> wave(calls.begin() + i,
                           calls.begin() + std::min(calls.size(), i + static_cast<size_t>(args.concurrency)));
    auto t0 = std::chrono::steady_clock::now();
    if (!args.unprepare_only) together.Run(wave, [&](Call& c) { RunPrepare(client, c, pause); });
    if (!args.prepare_only) together.Run(wave, [&](Call& c) { RunUnprepare(client, c, pause); });
    double ms = MsSince(t0);
    if (i < static_cast<size_t>(args.hold_after)) {
      // A warm-up wave: checked for errors, left out of the figures.
      for (const auto& c : wave)
        for (const auto& e : c.errors) errors.push_back(e);
      if (i + static_cast<size_t>(args.concurrency) >= static_cast<size_t>(args.hold_after)) HoldUntilReleased();
      continue;
    }
    waves.push_back(ms);
    total_ms += ms;
    for (const auto& c : wave) {
      if (c.prepare_ms >= 0) prep.push_back(c.prepare_ms);
      if (c.unprepare_ms >= 0) unprep.push_back(c.unprepare_ms);
      for (const auto& e : c.errors) errors.push_back(e);
    }
  }
  nlohmann::json out{{"prepare_ms", Summary(prep)},
                     {"unprepare_ms", Summary(unprep)},
                     {"wave_ms", Summary(waves)},
                     {"total_ms", total_ms},
                     {"claims_per_s", total_ms > 0 ? 1000.0 * claims->size() / total_ms : 0.0},
                     {"errors", errors}};
  if (args.samples) {
    // Every call's latency, in call order, so that callers can merge the
    // runs of several nodes into one distribution.
    out["prepare_samples_ms"] = prep;
    out["unprepare_samples_ms"] = unprep;
  }
  std::cout << out.dump(2) << std::endl;
  return errors.empty() ? 0 : 1;
}

void AddCycleSubcommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CycleArgs>();
  auto* cmd = app.add_subcommand(
      "cycle", "Prepare then unprepare the claims (v1) over one held connection and print the latency "
               "of the calls as JSON: {\"prepare_ms\": {count, p50, p90, p99, max, mean}, \"unprepare_ms\": ..., "
               "\"wave_ms\": ..., \"claims_per_s\", \"errors\": [..]}. Claims go in waves of --concurrency "
               "calls of --batch claims each; a wave is prepared together, then unprepared together. Exit "
               "status 1 if any call failed. --samples adds every call's latency: \"prepare_samples_ms\": [..], "
               "\"unprepare_samples_ms\": [..].");
  cmd->add_option("--socket", args->socket, "the plugin's DRA socket")->required();
  cmd->add_option("--concurrency", args->concurrency, "calls in flight together (default 1)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--batch", args->batch, "claims per call (default 1)")->check(CLI::Range(1, 100000));
  cmd->add_flag("--prepare-only", args->prepare_only, "prepare and keep the claims prepared");
  cmd->add_flag("--unprepare-only", args->unprepare_only, "only unprepare the claims");
  cmd->add_flag("--samples", args->samples, "also print every call's latency (ms)");
  cmd->add_option("--pause-us", args->pause_us,
                  "idle before each call, not counted in its latency (wave times include it; default 0)")
      ->check(CLI::Range(0, 10000000));
  cmd->add_option("--hold-after", args->hold_after,
                  "warm-up: cycle the first N claims, leave them out of the figures, print \"held\" on "
                  "stderr and wait for a line on stdin before the rest (default 0: no hold)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("claims", args->claims, "claims as namespace/name/uid")->required();
  cmd->callback([args, &exit_code] { exit_code = RunCycle(*args); });
}

int RunWaitInfo(const std::string& socket, int timeout_ms) {
  std::cout << nlohmann::json{{"ready", true}}.dump() << std::endl;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  kubelet::PluginClient client(socket);
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st;
    if (::stat(socket.c_str(), &st) == 0 && client.GetInfo(std::chrono::milliseconds(500)).ok()) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      std::cout
          << nlohmann::json{{"answered_unix_ns", static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec}}.dump()
          << std::endl;
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::cerr << "GetInfo on " << socket << " did not answer within " << timeout_ms << " ms\n";
  return 1;
}

void AddWaitInfoSubcommand(CLI::App& app, int& exit_code) {
  auto wait_socket = std::make_shared<std::string>();
  auto wait_timeout_ms = std::make_shared<int>(10000);
  auto* wait = app.add_subcommand(
      "wait-info", "Print {\"ready\": true} once started, then poll the registration socket every millisecond "
                   "until GetInfo answers and print {\"answered_unix_ns\": N} (CLOCK_REALTIME). Exit status 1 "
                   "on timeout.");
  wait->add_option("--socket", *wait_socket, "the plugin's registration socket")->required();
  wait->add_option("--timeout-ms", *wait_timeout_ms, "give up after this long (default 10000)");
  wait->callback([wait_socket, wait_timeout_ms, &exit_code] {
    exit_code = RunWaitInfo(*wait_socket, *wait_timeout_ms);
  });
}

}  // namespace

void AddCycleCommand(CLI::App& app, int& exit_code) {
  AddCycleSubcommand(app, exit_code);
  AddWaitInfoSubcommand(app, exit_code);
}

}  // namespace nvdra::ctl
