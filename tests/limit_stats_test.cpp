// How `pgjobd stats` and the dashboard write a limit's rate: as the YAML wrote it, kept
// beside the starts per second; from those alone for a row an older daemon wrote.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "db/admin/limit_stats.hpp"
#include "pgjobd/config.hpp"

namespace pgjobd {
namespace {

double per_second_of(const std::string& rate) {
  const Config config = parse_config("limits: {a: {types: [x], rate: " + rate + "}}\n", "t.yaml");
  return config.limits->at("a").rate_per_second;
}

// A row an older daemon wrote: the starts per second alone.
TEST(LimitStatsTest, ARateWithoutItsTextReadsInOneSpelling) {
  for (const char* written :
       {"10/s", "2/s", "1000000/s", "60/m", "1/m", "90/m", "100/h", "30/h", "1/h", "36/h"}) {
    EXPECT_EQ(describe_limit_rate("", per_second_of(written), 1), std::string("rate ") + written);
  }
  // The same number written otherwise reads in one spelling: a whole number per second
  // above 1, else per minute, else per hour.
  for (const auto& [written, shown] : std::vector<std::pair<std::string, std::string>>{
           {"1/s", "60/m"}, {"0.5/s", "30/m"}, {"120/m", "2/s"}, {"3600/h", "60/m"}}) {
    EXPECT_EQ(describe_limit_rate("", per_second_of(written), 1), "rate " + shown) << written;
  }
  EXPECT_EQ(describe_limit_rate("", 0.001, 1), "rate 0.001/s");
}

TEST(LimitStatsTest, ARateKeptAsWrittenReadsSo) {
  EXPECT_EQ(describe_limit_rate("1/s", 1, 1), "rate 1/s");
  EXPECT_EQ(describe_limit_rate("120/m", 2, 1), "rate 120/m");
  EXPECT_EQ(describe_limit_rate("3600/h", 1, 5), "rate 3600/h, burst 5");
}

TEST(LimitStatsTest, TheBurstOnlyWhenNotTheDefault) {
  EXPECT_EQ(describe_limit_rate("", 10, 20), "rate 10/s, burst 20");
  EXPECT_EQ(describe_limit_rate("", 1, 1), "rate 60/m");
}

}  // namespace
}  // namespace pgjobd
