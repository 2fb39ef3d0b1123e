// Test helper run as a child process by the crash matrix and the two-process
// storm test; with a failpoint armed to crash it dies mid-sequence exactly
// like a kill -9.
//   ledger_crash_helper script <dir>
//     runs crash_script.h, printing "ACK <step>" after each acknowledged step,
//     then "HITS <failpoint> <n>" for every ledger failpoint
//   ledger_crash_helper storm <dir> <name> <ops> <seed>
//     random conflicting prepare/unprepare cycles on four devices, printing
//     "HELD <device> <uid> <begin-acked-ns> <finish-called-ns>" per finished cycle
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "ledger/claim_ledger.h"
#include "ledger/crash_script.h"
#include "util/failpoint.h"

using namespace nvdra;
using namespace nvdra::ledger;

namespace {

// write(2), not stdio: a line must reach the pipe before a crash can hit.
void Say(const std::string& line) {
  std::string l = line + "\n";
  if (::write(1, l.data(), l.size()) < 0) std::_Exit(3);
}

[[noreturn]] void Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  std::_Exit(1);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<AllocatedDevice> Alloc(const std::vector<std::string>& devs) {
  std::vector<AllocatedDevice> out;
  for (const auto& d : devs) out.push_back({"req", "gpu.nvidia.com", "node", d, false, "", {}});
  return out;
}

std::vector<PreparedDevice> Prep(const std::string& uid, const std::vector<std::string>& devs) {
  std::vector<PreparedDevice> out;
  for (const auto& d : devs) out.push_back({{"req"}, "node", d, {"k8s.gpu.nvidia.com/claim=" + uid + "-" + d}, ""});
  return out;
}

std::unique_ptr<ClaimLedger> OpenOrDie(const std::string& dir) {
  LedgerOptions o;
  o.dir = dir;
  o.boot_id = "boot-crash";
  o.lock_timeout = std::chrono::seconds(30);
  auto l = ClaimLedger::Open(o);
  if (!l.ok()) Fail("open", l.status());
  return std::move(l).value();
}

int RunScript(const std::string& dir) {
  auto l = OpenOrDie(dir);
  Say("OPENED");
  const auto& script = crash::Script();
  for (size_t i = 0; i < script.size(); ++i) {
    const auto& st = script[i];
    Status s;
    switch (st.op) {
      case crash::Op::kBegin:
      case crash::Op::kBeginConflict: {
        BeginPrepareRequest r{st.uid, "ns", st.uid, Alloc(st.devices), std::nullopt, {{"step", i}}, {}, {}};
        auto b = l->BeginPrepare(r);
        if (st.op == crash::Op::kBeginConflict) {
          if (b.status().code() != StatusCode::kConflict) Fail("expected conflict", b.status());
        } else {
          s = b.status();
        }
        break;
      }
      case crash::Op::kComplete: s = l->CompletePrepare(st.uid, Prep(st.uid, st.devices), nullptr); break;
      case crash::Op::kBeginUnprepare: s = l->BeginUnprepare(st.uid).status(); break;
      case crash::Op::kFinishUnprepare: s = l->FinishUnprepare(st.uid); break;
      case crash::Op::kCompact: s = l->CollectGarbage(true); break;
    }
    if (!s.ok()) Fail("step " + std::to_string(i), s);
    Say("ACK " + std::to_string(i));
  }
  // What a dry run tells the crash matrix: how often each point was reached.
  for (const auto& fp : crash::LedgerFailpoints()) {
    Say("HITS " + fp + " " + std::to_string(FailPoints::Process().HitCount(fp)));
  }
  return 0;
}

int RunStorm(const std::string& dir, const std::string& name, int ops, unsigned seed) {
  auto l = OpenOrDie(dir);
  std::mt19937 rng(seed);
  const char* devices[] = {"gpu-0", "gpu-1", "gpu-2", "gpu-3"};
  struct Live {
    std::string uid, device;
    int64_t acked;
    bool completed;
  };
  std::vector<Live> live;
  int serial = 0;
  for (int op = 0; op < ops; ++op) {
    if (live.empty() || (live.size() < 3 && rng() % 2 == 0)) {
      std::string dev = devices[rng() % 4];
      std::string uid = name + "-" + std::to_string(serial++);
      BeginPrepareRequest r{uid, "ns", uid, Alloc({dev}), std::nullopt, nullptr, {}, {}};
      auto b = l->BeginPrepare(r);
      if (b.ok()) {
        live.push_back({uid, dev, NowNs(), false});
      } else if (b.status().code() != StatusCode::kConflict) {
        Fail("begin " + uid, b.status());
      }
      continue;
    }
    size_t k = rng() % live.size();
    Live& c = live[k];
    if (!c.completed && rng() % 3 != 0) {
      Status s = l->CompletePrepare(c.uid, Prep(c.uid, {c.device}), nullptr);
      if (!s.ok()) Fail("complete " + c.uid, s);
      c.completed = true;
      continue;
    }
    int64_t finish_called = NowNs();
    auto u = l->BeginUnprepare(c.uid);
    if (!u.ok() || !u->has_value()) Fail("begin unprepare " + c.uid, u.status());
    Status s = l->FinishUnprepare(c.uid);
    if (!s.ok()) Fail("finish unprepare " + c.uid, s);
    Say("HELD " + c.device + " " + c.uid + " " + std::to_string(c.acked) + " " + std::to_string(finish_called));
    live.erase(live.begin() + static_cast<long>(k));
  }
  for (const auto& c : live) {
    Say("HELD " + c.device + " " + c.uid + " " + std::to_string(c.acked) + " " + std::to_string(NowNs()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "script") return RunScript(argv[2]);
  if (argc >= 6 && std::string(argv[1]) == "storm") {
    return RunStorm(argv[2], argv[3], std::atoi(argv[4]), static_cast<unsigned>(std::atoi(argv[5])));
  }
  std::fprintf(stderr, "usage: %s script <dir> | storm <dir> <name> <ops> <seed>\n", argv[0]);
  return 2;
}
