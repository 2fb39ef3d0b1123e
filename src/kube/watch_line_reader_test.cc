// WatchLineReader: lines as they complete, each byte searched once however
// the stream is cut, and a bound on one line.
#include "kube/watch_line_reader.h"

#include <gtest/gtest.h>

#include <vector>

namespace nvdra::kube {
namespace {

TEST(WatchLineReaderTest, HandsOverCompleteNonBlankLinesAcrossPieces) {
  WatchLineReader r("watch Nodes");
  std::vector<std::string> got;
  auto sink = [&](const std::string& l) {
    got.push_back(l);
    return Status::Ok();
  };
  ASSERT_TRUE(r.Feed("{\"a\":1}\n \r\n{\"b\"", sink).ok());
  ASSERT_TRUE(r.Feed(":2}", sink).ok());
  EXPECT_EQ(got, (std::vector<std::string>{"{\"a\":1}"}));
  ASSERT_TRUE(r.Feed("\n", sink).ok());
  EXPECT_EQ(got, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(WatchLineReaderTest, ALineArrivingByteByByteIsScannedOnce) {
  // 4 MiB in 4 KiB pieces: a rescan from the line's start on every piece
  // would search about 2 GiB.
  WatchLineReader r("watch Nodes");
  std::string piece(4096, 'x');
  size_t fed = 0;
  int lines = 0;
  auto sink = [&](const std::string& l) {
    EXPECT_EQ(l.size(), size_t{4} << 20);
    ++lines;
    return Status::Ok();
  };
  for (int i = 0; i < 1024; ++i) {
    ASSERT_TRUE(r.Feed(piece, sink).ok());
    fed += piece.size();
  }
  ASSERT_TRUE(r.Feed("\n", sink).ok());
  ++fed;
  EXPECT_EQ(lines, 1);
  EXPECT_EQ(r.bytes_scanned(), fed);
}

TEST(WatchLineReaderTest, ALineOverTheBoundEndsTheStreamAndFreesTheBuffer) {
  WatchLineReader r("watch Nodes", 1000);
  int lines = 0;
  auto sink = [&](const std::string&) {
    ++lines;
    return Status::Ok();
  };
  ASSERT_TRUE(r.Feed(std::string(600, 'x'), sink).ok());
  Status s = r.Feed(std::string(600, 'x'), sink);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "watch Nodes: an event is longer than 1000 bytes; ending the watch");
  EXPECT_EQ(r.buffered(), 0u);
  // A complete line over the bound is refused too, and nothing more is taken.
  WatchLineReader r2("watch Nodes", 10);
  EXPECT_FALSE(r2.Feed(std::string(20, 'y') + "\n{}\n", sink).ok());
  EXPECT_FALSE(r2.Feed("{}\n", sink).ok());
  EXPECT_EQ(lines, 0);
}

TEST(WatchLineReaderTest, TheSinksErrorStopsTheReader) {
  WatchLineReader r("watch Nodes");
  int lines = 0;
  auto sink = [&](const std::string&) {
    ++lines;
    return InvalidArgument("bad event");
  };
  EXPECT_EQ(r.Feed("a\nb\n", sink).message(), "bad event");
  EXPECT_EQ(r.Feed("c\n", sink).message(), "bad event");
  EXPECT_EQ(lines, 1);
}

}  // namespace
}  // namespace nvdra::kube
