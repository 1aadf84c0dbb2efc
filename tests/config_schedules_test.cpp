// The `schedules:` section: what it reads (payload as JSON), its defaults, and the
// file:line:key problems for bad cron text, time zones and values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "schedule/capacity.hpp"
#include "support/config_problems.hpp"

namespace pgjobd {
namespace {

using testing::problem;
using testing::problems;

TEST(ConfigSchedulesTest, ReadsTheIssuesExample) {
  Config config = parse_config(R"(
schedules:
  nightly_report: {cron: "30 2 * * *", timezone: Europe/Berlin, type: report, payload: {kind: nightly}}
  heartbeat:      {every: 30s, type: ping, queue: ops}
  fast:           {cron: "*/5 * * * * *", type: ping}      # 6 fields: with seconds
)",
                               "t.yaml");
  ASSERT_EQ(config.schedules->size(), 3u);
  const ScheduleConfig& nightly = config.schedules->at("nightly_report");
  EXPECT_EQ(nightly.cron, "30 2 * * *");
  EXPECT_EQ(nightly.timezone, "Europe/Berlin");
  EXPECT_EQ(nightly.type, "report");
  EXPECT_EQ(nightly.payload, R"({"kind":"nightly"})");
  const ScheduleConfig& heartbeat = config.schedules->at("heartbeat");
  EXPECT_EQ(heartbeat.every, Millis(30'000));
  EXPECT_EQ(heartbeat.queue, "ops");
  EXPECT_EQ(heartbeat.timezone, "UTC");
  EXPECT_EQ(heartbeat.payload, "{}");
  EXPECT_EQ(heartbeat.misfire, "skip");
  EXPECT_EQ(heartbeat.overlap, "allow");
  EXPECT_TRUE(heartbeat.enabled);
  EXPECT_EQ(config.schedules->at("fast").cron, "*/5 * * * * *");
}

// Absent and empty differ (README "Recurring jobs"): only a config with the key
// reconciles the table's YAML schedules, and `schedules: {}` removes them all.
TEST(ConfigSchedulesTest, AnAbsentSectionDiffersFromAnEmptyOne) {
  EXPECT_FALSE(parse_config("handlers: {t: {builtin: noop}}\n", "t.yaml").schedules.has_value());
  const Config empty = parse_config("schedules: {}\n", "t.yaml");
  ASSERT_TRUE(empty.schedules.has_value());
  EXPECT_TRUE(empty.schedules->empty());
}

TEST(ConfigSchedulesTest, PayloadBecomesJsonWithYamlCoreTypes) {
  Config config = parse_config(R"(
schedules:
  s:
    every: 1m
    type: t
    payload:
      n: 12
      x: -1.5e3
      yes_word: yes
      quoted: "12"
      flag: true
      none: ~
      list: [a, 2, {b: "q\"uote\n"}]
)",
                               "t.yaml");
  EXPECT_EQ(config.schedules->at("s").payload,
            R"({"n":12,"x":-1500.0,"yes_word":"yes","quoted":"12","flag":true,"none":null,)"
            R"("list":["a",2,{"b":"q\"uote\n"}]})");
}

std::string payload_of(const std::string& payload_yaml) {
  return parse_config(
             "schedules:\n  s:\n    every: 1m\n    type: t\n    payload: " + payload_yaml + "\n",
             "t.yaml")
      .schedules->at("s")
      .payload;
}

// Numbers are read as JSON reads them: 64-bit integers exactly, others as doubles written in
// their shortest form; the value never changes.
TEST(ConfigSchedulesTest, PayloadNumbersKeepTheirValue) {
  EXPECT_EQ(payload_of("[9223372036854775807, -9223372036854775808, 18446744073709551615]"),
            "[9223372036854775807,-9223372036854775808,18446744073709551615]");
  EXPECT_EQ(payload_of("[0.1, 1.50, 1E2, 2.5e-3, -0, 0.0, 0e999999999999999999999]"),
            "[0.1,1.5,100.0,0.0025,0,0.0,0.0]");
  EXPECT_EQ(payload_of("[1.7976931348623157e308, 5e-324, 0.30000000000000004]"),
            "[1.7976931348623157e+308,5e-324,0.30000000000000004]");
}

TEST(ConfigSchedulesTest, PayloadNumberADoubleCannotHoldIsAProblem) {
  for (const char* number : {"18446744073709551616", "123456789012345678901234", "1e400", "1e-400",
                             "4.9e-324", "0.30000000000000001", "1e99999999999999999999"}) {
    EXPECT_EQ(problem("schedules:\n  s:\n    every: 1m\n    type: t\n    payload: {n: " +
                      std::string(number) + "}\n"),
              "t.yaml:5: schedules.s.payload: number " + std::string(number) +
                  " cannot be kept exactly in JSON (a 64-bit integer or a double); quote it to "
                  "keep it as a string");
  }
  EXPECT_EQ(payload_of("{n: \"123456789012345678901234\"}"), R"({"n":"123456789012345678901234"})");
}

TEST(ConfigSchedulesTest, PayloadKeysKeepTheirOrderAndARepeatedKeyItsLastValue) {
  EXPECT_EQ(payload_of("{z: 1, a: 2, m: {y: 3, b: 4}}"), R"({"z":1,"a":2,"m":{"y":3,"b":4}})");
  // As jsonb keeps it: the last value, in the first place.
  EXPECT_EQ(payload_of("{a: 1, b: 2, a: [3]}"), R"({"a":[3],"b":2})");
  EXPECT_EQ(payload_of("{[x]: 1}"), R"({"":1})");  // a key that is no scalar
}

TEST(ConfigSchedulesTest, PayloadStringsAreValidUtf8AndEscaped) {
  EXPECT_EQ(payload_of("\"caf\xC3\xA9 \xFF \\b\\u0001 \\u007F\""),
            "\"caf\xC3\xA9 \xEF\xBF\xBD \\b\\u0001 \x7F\"");
  EXPECT_EQ(payload_of("{\"k\\u0000\": plain \xC3}"), "{\"k\\u0000\":\"plain \xEF\xBF\xBD\"}");
  EXPECT_EQ(payload_of("[~, null, \"null\", yes, True, FALSE, 012, 1_000, .5]"),
            R"([null,null,"null","yes",true,false,"012","1_000",".5"])");
}

// The payload itself is level 0: 65 nested arrays still fit.
TEST(ConfigSchedulesTest, PayloadNestedTooDeepIsAProblem) {
  EXPECT_EQ(problem("schedules:\n  s:\n    every: 1m\n    type: t\n    payload: " +
                    std::string(66, '[') + std::string(66, ']') + "\n"),
            "t.yaml:5: schedules.s.payload: nested deeper than 64 levels");
  EXPECT_EQ(payload_of(std::string(65, '[') + std::string(65, ']')),
            std::string(65, '[') + std::string(65, ']'));
}

TEST(ConfigSchedulesTest, EveryOptionalKeyIsRead) {
  Config config = parse_config(R"(
schedules:
  s: {cron: "@daily", type: t, queue: q, priority: -3, max_attempts: 2, enabled: false,
      overlap: skip, misfire: all, misfire_grace: 5m}
)",
                               "t.yaml");
  const ScheduleConfig& s = config.schedules->at("s");
  EXPECT_EQ(s.priority, -3);
  EXPECT_EQ(s.max_attempts, 2);
  EXPECT_FALSE(s.enabled);
  EXPECT_EQ(s.overlap, "skip");
  EXPECT_EQ(s.misfire, "all");
  EXPECT_EQ(s.misfire_grace, Millis(300'000));
}

TEST(ConfigSchedulesTest, BadCronTextIsAProblemAtItsLine) {
  EXPECT_EQ(problem("schedules:\n  s:\n    type: t\n    cron: \"61 * * * *\"\n"),
            "t.yaml:4: schedules.s.cron: minute field '61': 61 is out of range 0-59");
  EXPECT_EQ(problem("schedules:\n  s: {type: t, cron: \"0 0 L * *\"}\n"),
            "t.yaml:2: schedules.s.cron: day of month field 'L': 'L' is not a number (L, W, # "
            "and ? are not supported)");
  EXPECT_EQ(problem("schedules:\n  s: {type: t, cron: \"* * *\"}\n"),
            "t.yaml:2: schedules.s.cron: expected 5 fields (minute hour day-of-month month "
            "day-of-week) or 6 with leading seconds, got 3 in '* * *'");
}

TEST(ConfigSchedulesTest, UnknownTimeZoneIsAProblemAtItsLine) {
  EXPECT_EQ(problem("schedules:\n  s:\n    cron: \"@hourly\"\n    type: t\n"
                    "    timezone: Europe/Berlim\n"),
            "t.yaml:5: schedules.s.timezone: unknown time zone 'Europe/Berlim' (use an IANA "
            "name such as Europe/Berlin, America/New_York or UTC)");
}

TEST(ConfigSchedulesTest, TimingTypeAndValuesAreChecked) {
  EXPECT_EQ(problem("schedules:\n  s: {type: t}\n"),
            "t.yaml:2: schedules.s: no timing: give exactly one of cron or every");
  EXPECT_EQ(problem("schedules:\n  s: {type: t, every: 1s, cron: \"@daily\"}\n"),
            "t.yaml:2: schedules.s: has both cron and every: give exactly one");
  EXPECT_EQ(problem("schedules:\n  s: {every: 1s}\n"),
            "t.yaml:2: schedules.s: missing type (the job type each tick inserts)");
  EXPECT_EQ(problem("schedules:\n  s: {type: t, every: 1500ms}\n"),
            "t.yaml:2: schedules.s.every: must be whole seconds, at least 1s, got 1500ms");
  EXPECT_EQ(problem("schedules:\n  s: {type: t, every: 1s, misfire: later}\n"),
            "t.yaml:2: schedules.s.misfire: unknown misfire 'later' (use skip, all or none)");
  EXPECT_EQ(problem("schedules:\n  s: {type: t, every: 1s, overlap: no}\n"),
            "t.yaml:2: schedules.s.overlap: unknown overlap 'no' (use allow or skip)");
  EXPECT_EQ(problem("schedules:\n  s: {type: t, every: 1s, priority: 40000}\n"),
            "t.yaml:2: schedules.s.priority: must be from -32768 to 32767, got 40000");
  EXPECT_EQ(problem("schedules:\n  s: {type: t, every: 1s, max_attempts: 0}\n"),
            "t.yaml:2: schedules.s.max_attempts: must be at least 1, got 0");
  EXPECT_EQ(problem("schedules:\n  \"a b\": {type: t, every: 1s}\n"),
            "t.yaml:2: schedules.a b: a schedule name is 1 to 100 letters, digits, _, - or . (it "
            "names the jobs' unique_key and a metric label)");
}

// More ticks per second than the scheduler fires are refused, naming both rates; at the
// capacity the section passes. A 6-field cron line counts its seconds per minute.
TEST(ConfigSchedulesTest, MoreTicksPerSecondThanTheSchedulerFiresAreRefused) {
  const auto capacity = static_cast<int>(schedule::kTicksPerSecondCapacity);
  const auto section = [](int per_second) {
    std::string yaml = "schedules:\n";
    for (int i = 0; i < per_second; ++i)
      yaml += "  s" + std::to_string(i) + ": {type: t, every: 1s}\n";
    return yaml;
  };
  EXPECT_TRUE(testing::problems_of(section(capacity)).empty());
  EXPECT_EQ(problem(section(capacity - 1) + "  c: {type: t, cron: \"*/30 * * * * *\"}\n" +
                    "  d: {type: t, cron: \"* * * * * *\"}\n"),
            "t.yaml:1: schedules: ask for up to " + std::to_string(capacity + 1) +
                " ticks per second; the scheduler fires about " + std::to_string(capacity) +
                " per second (more daemons do not add to it) and would miss the rest: use longer "
                "intervals (README \"Recurring jobs\")");
}

TEST(ConfigSchedulesTest, UnknownKeyIsReportedWithASuggestion) {
  std::string found = problem("schedules:\n  s: {type: t, every: 1s, timezon: UTC}\n");
  EXPECT_NE(found.find("t.yaml:2: schedules.s.timezon: unknown key"), std::string::npos) << found;
  EXPECT_NE(found.find("timezone"), std::string::npos) << found;
}

}  // namespace
}  // namespace pgjobd
