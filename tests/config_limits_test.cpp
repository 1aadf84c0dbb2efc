// The `limits:` section: what it reads (the issue's example), its rates, and the
// file:line:key problems for limits that match or limit nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "support/config_problems.hpp"

namespace pgjobd {
namespace {

using testing::problem;
using testing::problems;

TEST(ConfigLimitsTest, ReadsTheIssuesExample) {
  const Config config = parse_config(R"(
limits:
  partner_api: {types: [call_partner], concurrency: 3}
  mail:        {types: [send_email, send_sms], rate: 10/s, burst: 20}
  per_user:    {types: [sync_user], key: user, concurrency: 1}
  per_tenant:  {queues: [reports], key: tenant, rate: 60/m, concurrency: 2}
)",
                                     "t.yaml");
  ASSERT_TRUE(config.limits.has_value());
  ASSERT_EQ(config.limits->size(), 4u);
  const LimitConfig& partner = config.limits->at("partner_api");
  EXPECT_EQ(partner.types, std::vector<std::string>{"call_partner"});
  EXPECT_EQ(partner.concurrency, 3);
  EXPECT_EQ(partner.rate_per_second, 0);
  EXPECT_EQ(partner.burst, 1);
  const LimitConfig& mail = config.limits->at("mail");
  EXPECT_EQ(mail.rate, "10/s");
  EXPECT_DOUBLE_EQ(mail.rate_per_second, 10);
  EXPECT_EQ(mail.burst, 20);
  EXPECT_EQ(config.limits->at("per_user").key, "user");
  const LimitConfig& tenant = config.limits->at("per_tenant");
  EXPECT_EQ(tenant.queues, std::vector<std::string>{"reports"});
  EXPECT_DOUBLE_EQ(tenant.rate_per_second, 1);
  EXPECT_EQ(tenant.concurrency, 2);
}

TEST(ConfigLimitsTest, NoSectionIsNotAnEmptySection) {
  EXPECT_FALSE(parse_config("worker: {concurrency: 2}\n", "t.yaml").limits.has_value());
  const Config empty = parse_config("limits: {}\n", "t.yaml");
  ASSERT_TRUE(empty.limits.has_value()) << "an empty section removes every limit";
  EXPECT_TRUE(empty.limits->empty());
}

TEST(ConfigLimitsTest, RatesPerSecondMinuteAndHour) {
  for (const auto& [text, per_second] : std::vector<std::pair<std::string, double>>{
           {"10/s", 10}, {"0.5/s", 0.5}, {"90/m", 1.5}, {"36/h", 0.01}}) {
    const Config config = parse_config("limits: {a: {types: [x], rate: " + text + "}}\n", "t.yaml");
    EXPECT_DOUBLE_EQ(config.limits->at("a").rate_per_second, per_second) << text;
  }
  for (const char* bad : {"10", "10/d", "/s", "-1/s", "0/s", "ten/s", "10/s/s", "2000000/s"}) {
    EXPECT_EQ(problem(std::string("limits:\n  a: {types: [x], rate: \"") + bad + "\"}\n"),
              std::string("t.yaml:2: limits.a.rate: bad rate '") + bad +
                  "' (use starts per second, minute or hour: 10/s, 60/m, 100/h; at most "
                  "1000000/s)");
  }
}

TEST(ConfigLimitsTest, ALimitMustMatchSomethingAndLimitSomething) {
  EXPECT_EQ(problem("limits:\n  a: {concurrency: 3}\n"),
            "t.yaml:2: limits.a: matches every job: give types, queues or both");
  EXPECT_EQ(problem("limits:\n  a: {types: [x]}\n"),
            "t.yaml:2: limits.a: limits nothing: give concurrency, rate or both");
  EXPECT_EQ(problem("limits:\n  a: {types: [x], concurrency: -1}\n"),
            "t.yaml:2: limits.a.concurrency: must be from 1 to 100000, got -1");
  EXPECT_EQ(problem("limits:\n  a: {types: [x], concurrency: 2, burst: 5}\n"),
            "t.yaml:2: limits.a.burst: only valid with rate");
  EXPECT_EQ(problem("limits:\n  a: {types: [x], rate: 1/s, burst: 0}\n"),
            "t.yaml:2: limits.a.burst: must be from 1 to 1000000, got 0");
  EXPECT_EQ(problem("limits:\n  bad name: {types: [x], concurrency: 1}\n"),
            "t.yaml:2: limits.bad name: a limit name is 1 to 100 letters, digits, _, - or . (it "
            "labels metrics)");
  EXPECT_EQ(problem("limits:\n  a: {types: [x], concurrency: 1, keys: user}\n"),
            "t.yaml:2: limits.a.keys: unknown key (did you mean 'key'?)");
}

}  // namespace
}  // namespace pgjobd
