#include "cmd/plugin_common/companion_list.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace nvdra::plugin {
namespace {

struct Part {
  Part(std::string n, std::vector<std::string>& l) : name(std::move(n)), log(l) {}
  ~Part() { log.push_back("destroy " + name); }
  void Stop() { log.push_back("stop " + name); }
  std::string name;
  std::vector<std::string>& log;
};

struct Passive {
  Passive(std::string n, std::vector<std::string>& l) : name(std::move(n)), log(l) {}
  ~Passive() { log.push_back("destroy " + name); }
  std::string name;
  std::vector<std::string>& log;
};

TEST(CompanionListTest, StopsAllLastAddedFirstThenDestroysInTheSameOrder) {
  std::vector<std::string> log;
  {
    CompanionList list;
    Part& watch = list.Add(std::make_unique<Part>("watch", log));
    EXPECT_EQ(watch.name, "watch");
    list.Keep(std::make_unique<Passive>("dirs", log));
    list.Add(std::make_unique<Part>("maintenance", log));
    EXPECT_EQ(list.size(), 3u);
    EXPECT_TRUE(log.empty());
  }
  EXPECT_EQ(log, (std::vector<std::string>{"stop maintenance", "stop watch", "destroy maintenance", "destroy dirs",
                                           "destroy watch"}));
}

TEST(CompanionListTest, ClearRunsOnceAndLeavesTheListEmpty) {
  std::vector<std::string> log;
  CompanionList list;
  list.Add(std::make_unique<Part>("a", log));
  list.Clear();
  EXPECT_EQ(list.size(), 0u);
  EXPECT_EQ(log, (std::vector<std::string>{"stop a", "destroy a"}));
  list.Clear();
  EXPECT_EQ(log.size(), 2u);
}

}  // namespace
}  // namespace nvdra::plugin
