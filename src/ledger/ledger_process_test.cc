// Multi-process tests: the crash matrix (a child killed at every ledger
// failpoint, then the parent reopens and checks the invariants) and the
// two-process storm (two plugins on one directory never double-hold).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "ledger/claim_ledger.h"
#include "ledger/crash_script.h"
#include "ledger/ledger_inspector.h"
#include "ledger/ledger_test_util.h"
#include "util/file_util.h"
#include "util/test_paths.h"

namespace nvdra::ledger {
namespace {

using testing::ScratchDir;

struct Child {
  pid_t pid = -1;
  int out_fd = -1;
};

struct ChildResult {
  bool killed = false;  // died of a signal (a crash failpoint)
  int exit_code = -1;
  std::vector<std::string> lines;
};

std::string HelperPath() { return std::string(NVDRA_BIN_DIR) + "/ledger_crash_helper"; }

Child Spawn(const std::vector<std::string>& args, const std::string& failpoints) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    if (failpoints.empty()) {
      ::unsetenv("NVDRA_FAILPOINTS");
    } else {
      ::setenv("NVDRA_FAILPOINTS", failpoints.c_str(), 1);
    }
    std::vector<char*> argv;
    std::string helper = HelperPath();
    argv.push_back(helper.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(helper.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

ChildResult Wait(Child c) {
  ChildResult r;
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(c.out_fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(c.out_fd);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  r.killed = WIFSIGNALED(status);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::istringstream is(out);
  for (std::string line; std::getline(is, line);) r.lines.push_back(line);
  return r;
}

std::unique_ptr<ClaimLedger> Reopen(const std::string& dir) {
  LedgerOptions o;
  o.dir = dir;
  o.boot_id = "boot-crash";
  auto l = ClaimLedger::Open(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(l).value() : nullptr;
}

void ExpectNoDoubleHeld(const std::vector<ClaimEntry>& entries) {
  std::map<std::string, std::string> holder;
  for (const auto& e : entries) {
    if (!HoldsResources(e.state)) continue;
    for (const auto& r : e.held) {
      auto [it, fresh] = holder.emplace(r, e.uid);
      EXPECT_TRUE(fresh) << r << " held by " << it->second << " and " << e.uid;
    }
  }
}

// The dry run: nothing fires, and the torn-write point is armed with `pass`
// so that a record is written in two halves around it, as a crash case
// armed there writes it.
constexpr const char* kDryRun = "ledger-mid-append=pass";

struct CrashCase {
  std::string failpoint;
  int hit;
};

void PrintTo(const CrashCase& c, std::ostream* os) { *os << c.failpoint << "=crash*" << c.hit; }

// Every hit of every ledger failpoint in one run of the script, as a dry run
// without failpoints counts them (so a change to the script or to the ledger
// never leaves a hit untested). Runs when the tests are listed.
std::vector<CrashCase> CrashCases() {
  ChildResult dry = Wait(Spawn({"script", ScratchDir().path()}, kDryRun));
  std::vector<CrashCase> out;
  for (const auto& line : dry.lines) {
    std::istringstream is(line);
    std::string tag, fp;
    int hits = 0;
    if (!(is >> tag >> fp >> hits) || tag != "HITS") continue;
    for (int h = 1; h <= hits; ++h) out.push_back({fp, h});
  }
  if (out.empty()) out.push_back({"dry-run-of-ledger_crash_helper-failed", 1});
  return out;
}

class CrashMatrixTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CrashMatrixTest, ReopensWithEveryAcknowledgedTransitionAndConverges) {
  const CrashCase& c = GetParam();
  ScratchDir dir;
  ChildResult r = Wait(Spawn({"script", dir.path()}, c.failpoint + "=crash*" + std::to_string(c.hit)));
  ASSERT_TRUE(r.killed) << c.failpoint << "*" << c.hit << " was not reached (exit " << r.exit_code << ")";
  size_t acked = 0;
  for (const auto& l : r.lines) {
    if (l.rfind("ACK ", 0) == 0) acked = std::stoul(l.substr(4)) + 1;
  }
  // 1. It opens (damage at most quarantined) ...
  auto ledger = Reopen(dir.path());
  ASSERT_NE(ledger, nullptr);
  auto entries = ledger->List();
  ASSERT_TRUE(entries.ok());
  // 2. ... reflecting every acknowledged step, and at most the one in flight.
  auto before = crash::StatesAfter(acked), after = crash::StatesAfter(acked + 1);
  std::map<std::string, ClaimState> got;
  for (const auto& e : *entries) got[e.uid] = e.state;
  std::set<std::string> uids;
  for (const auto& m : {before, after, got}) {
    for (const auto& [u, s] : m) uids.insert(u);
  }
  for (const auto& u : uids) {
    auto state = [&](const std::map<std::string, ClaimState>& m) {
      auto it = m.find(u);
      return it == m.end() ? std::string("absent") : std::string(ClaimStateName(it->second));
    };
    EXPECT_TRUE(state(got) == state(before) || state(got) == state(after))
        << u << " is " << state(got) << " after " << acked << " acknowledged steps; expected " << state(before)
        << " or " << state(after);
  }
  // 3. No device is held twice.
  ExpectNoDoubleHeld(*entries);
  // 4. The kubelet's retries converge: half-done prepares complete, half-done unprepares finish.
  for (const auto& e : *entries) {
    if (e.state == ClaimState::kPrepareStarted) {
      BeginPrepareRequest req{e.uid, e.ns, e.name, e.allocation, e.held, nullptr, {}};
      auto b = ledger->BeginPrepare(req);
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      EXPECT_EQ(b->outcome, BeginOutcome::kRetry);
      ASSERT_TRUE(ledger->CompletePrepare(e.uid, {}, nullptr).ok());
    } else if (e.state == ClaimState::kUnprepareStarted) {
      ASSERT_TRUE(ledger->BeginUnprepare(e.uid).ok());
      ASSERT_TRUE(ledger->FinishUnprepare(e.uid).ok());
    }
  }
  ledger.reset();
  auto again = Reopen(dir.path());
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->report().clean()) << again->report().Summary();
  auto final_entries = again->List();
  ASSERT_TRUE(final_entries.ok());
  for (const auto& e : *final_entries) {
    EXPECT_TRUE(e.state == ClaimState::kPrepareCompleted || e.state == ClaimState::kTombstone)
        << e.uid << " " << ClaimStateName(e.state);
  }
  EXPECT_FALSE(PathExists(JoinPath(dir.path(), std::string(kLogFileName) + ".tmp")));
}

INSTANTIATE_TEST_SUITE_P(AllFailpoints, CrashMatrixTest, ::testing::ValuesIn(CrashCases()),
                         [](const ::testing::TestParamInfo<CrashCase>& i) {
                           std::string n = i.param.failpoint + "_" + std::to_string(i.param.hit);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

TEST(CrashScriptTest, RunsToTheEndWithoutFailpoints) {
  ScratchDir dir;
  ChildResult r = Wait(Spawn({"script", dir.path()}, kDryRun));
  ASSERT_EQ(r.exit_code, 0);
  std::string last_ack;
  std::set<std::string> reached;
  for (const auto& l : r.lines) {
    if (l.rfind("ACK ", 0) == 0) last_ack = l;
    std::istringstream is(l);
    std::string tag, fp;
    int hits = 0;
    if (is >> tag >> fp >> hits && tag == "HITS" && hits > 0) reached.insert(fp);
  }
  EXPECT_EQ(last_ack, "ACK " + std::to_string(crash::Script().size() - 1));
  // The dry run the crash matrix is built from sees every point.
  for (const auto& fp : crash::LedgerFailpoints()) EXPECT_TRUE(reached.count(fp)) << fp;
  auto l = Reopen(dir.path());
  std::map<std::string, ClaimState> got;
  auto entries = l->List();
  ASSERT_TRUE(entries.ok());
  for (const auto& e : *entries) got[e.uid] = e.state;
  EXPECT_EQ(got, crash::StatesAfter(crash::Script().size()));
}

TEST(LedgerStormTest, TwoProcessesNeverDoubleHoldADevice) {
  ScratchDir dir;
  constexpr int kOps = 1200;
  Child a = Spawn({"storm", dir.path(), "alpha", std::to_string(kOps), "1"}, "");
  Child b = Spawn({"storm", dir.path(), "beta", std::to_string(kOps), "2"}, "");
  ChildResult ra = Wait(a), rb = Wait(b);
  ASSERT_EQ(ra.exit_code, 0);
  ASSERT_EQ(rb.exit_code, 0);
  // Each process's own log: intervals during which it certainly held a device.
  struct Hold {
    std::string who, uid;
    int64_t from, to;
  };
  std::map<std::string, std::vector<Hold>> by_device;
  size_t holds = 0;
  for (const auto* r : {&ra, &rb}) {
    for (const auto& line : r->lines) {
      std::istringstream is(line);
      std::string tag, dev, uid;
      int64_t from = 0, to = 0;
      if (!(is >> tag >> dev >> uid >> from >> to) || tag != "HELD") continue;
      by_device[dev].push_back({r == &ra ? "alpha" : "beta", uid, from, to});
      ++holds;
    }
  }
  EXPECT_GT(holds, 100u);  // the storm really prepared things
  size_t cross = 0;
  for (const auto& [dev, hs] : by_device) {
    for (size_t i = 0; i < hs.size(); ++i) {
      for (size_t j = i + 1; j < hs.size(); ++j) {
        if (hs[i].who == hs[j].who) continue;
        ++cross;
        bool overlap = hs[i].from < hs[j].to && hs[j].from < hs[i].to;
        EXPECT_FALSE(overlap) << dev << " held by " << hs[i].uid << " and " << hs[j].uid;
      }
    }
  }
  EXPECT_GT(cross, 0u);  // both processes used the same devices
  auto l = Reopen(dir.path());
  ASSERT_NE(l, nullptr);
  EXPECT_TRUE(l->report().clean()) << l->report().Summary();
  ExpectNoDoubleHeld(*l->List());
  auto insp = InspectLedger(dir.path());
  ASSERT_TRUE(insp.ok());
  EXPECT_FALSE(insp->damaged());
  EXPECT_EQ(insp->double_held, 0u);
}

}  // namespace
}  // namespace nvdra::ledger
