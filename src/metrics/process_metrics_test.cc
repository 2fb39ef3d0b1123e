#include "metrics/process_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "util/test_temp_dir.h"

namespace nvdra::metrics {
namespace {

namespace fs = std::filesystem;

class FakeProc {
 public:
  FakeProc() { fs::create_directories(root_ / "self" / "fd"); }
  void Write(const std::string& rel, const std::string& content) { std::ofstream(root_ / rel) << content; }
  std::string dir() const { return root_.string(); }
  std::string self() const { return (root_ / "self").string(); }

 private:
  ::nvdra::testing::TempDir tmp_{"nvdra-proc"};
  fs::path root_{tmp_.path()};
};

// A /proc/<pid>/stat line whose command name contains ") (" to pin parsing
// from the last parenthesis. utime=250 stime=150 threads=7 starttime=1000
// vsize=123456789 rss=300 pages.
constexpr char kStat[] = "42 (odd) (name) S 1 42 42 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 7 0 1000 123456789 300 "
                         "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";

TEST(ProcessMetricsTest, ParsesFixture) {
  FakeProc p;
  p.Write("stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n");
  p.Write("self/stat", kStat);
  p.Write("self/limits", "Limit                     Soft Limit           Hard Limit           Units\n"
                         "Max open files            1024                 4096                 files\n");
  for (const char* fd : {"0", "1", "2"}) p.Write(std::string("self/fd/") + fd, "");

  auto s = ReadProcessStats(p.dir(), p.self(), 4096, 100);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 4.0);
  EXPECT_DOUBLE_EQ(s->threads, 7);
  EXPECT_DOUBLE_EQ(s->start_time_seconds, 1700000010.0);
  EXPECT_DOUBLE_EQ(s->virtual_bytes, 123456789);
  EXPECT_DOUBLE_EQ(s->resident_bytes, 300.0 * 4096);
  EXPECT_DOUBLE_EQ(s->max_fds, 1024);
  EXPECT_DOUBLE_EQ(s->open_fds, 3);
}

TEST(ProcessMetricsTest, DamagedStatIsAnError) {
  FakeProc p;
  p.Write("stat", "btime 1\n");
  p.Write("self/limits", "");
  p.Write("self/stat", "42 (x) S 1 2\n");
  EXPECT_EQ(ReadProcessStats(p.dir(), p.self(), 4096, 100).status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(ReadProcessStats(p.dir() + "/missing", p.dir() + "/missing", 4096, 100).ok());
}

TEST(ProcessMetricsTest, NonNumericFieldsAreErrorsNotExceptions) {
  FakeProc p;
  p.Write("self/limits", "");
  std::string stat = kStat;
  p.Write("self/stat", stat.replace(stat.find(" 250 "), 5, " 2x0 "));
  p.Write("stat", "btime 1\n");
  auto s = ReadProcessStats(p.dir(), p.self(), 4096, 100);
  EXPECT_EQ(s.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("not a number"));
  p.Write("self/stat", kStat);
  p.Write("stat", "btime 1e999\n");
  EXPECT_EQ(ReadProcessStats(p.dir(), p.self(), 4096, 100).status().code(), StatusCode::kDataLoss);
  p.Write("stat", "btime 1\n");
  p.Write("self/limits", "Max open files            lots                 4096                 files\n");
  EXPECT_EQ(ReadProcessStats(p.dir(), p.self(), 4096, 100).status().code(), StatusCode::kDataLoss);
}

TEST(ProcessMetricsTest, RealProcessRendersPlausibleValues) {
  MetricRegistry r;
  auto m = ProcessMetrics::Create(r);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  m->reset();  // the refresh hook does not depend on the object
  std::string page = r.Render();
  auto value = [&](const std::string& name) {
    size_t pos = page.find("\n" + name + " ");
    EXPECT_NE(pos, std::string::npos) << name;
    return pos == std::string::npos ? -1.0 : std::stod(page.substr(pos + name.size() + 2));
  };
  EXPECT_GT(value("process_resident_memory_bytes"), 1024 * 1024);
  EXPECT_GT(value("process_virtual_memory_bytes"), 0);
  EXPECT_GE(value("process_open_fds"), 3);
  EXPECT_GE(value("process_threads"), 1);
  EXPECT_GT(value("process_start_time_seconds"), 1.5e9);
  EXPECT_GE(value("process_cpu_seconds_total"), 0);
  EXPECT_NE(page.find("# TYPE process_cpu_seconds_total counter"), std::string::npos);
}

TEST(ProcessMetricsTest, CpuCounterNeverGoesBack) {
  MetricRegistry r;
  auto* c = r.AddCounter("c_total", "h").value();
  Counter& s = c->WithLabels(LabelValues{});
  s.RaiseTo(5);
  s.RaiseTo(3);
  EXPECT_EQ(s.Value(), 5);
  s.RaiseTo(6.5);
  EXPECT_EQ(s.Value(), 6.5);
}

}  // namespace
}  // namespace nvdra::metrics
