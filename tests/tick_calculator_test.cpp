// Ticks of cron lines across both 2027 DST changes in Europe/Berlin (Mar 28 and Oct 31, at
// 01:00 UTC) and America/New_York (Mar 14 at 07:00 UTC, Nov 7 at 06:00 UTC), following ISC
// cron's rules; `every:` intervals; time zone names; the CLI's time formats.
#include "schedule/tick_calculator.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pgjobd::schedule {
namespace {

Instant utc(const std::string& text) { return parse_instant(text, "UTC"); }

// The next `n` ticks after `from`, as UTC text.
std::vector<std::string> ticks(const TickCalculator& calculator, const std::string& from, int n) {
  std::vector<std::string> out;
  Instant t = utc(from);
  for (int i = 0; i < n; ++i) {
    std::optional<Instant> next = calculator.next_after(t);
    if (!next) break;
    out.push_back(format_utc(*next));
    t = *next;
  }
  return out;
}

std::vector<std::string> cron_ticks(const std::string& line, const std::string& zone,
                                    const std::string& from, int n) {
  return ticks(TickCalculator::cron(line, zone), from, n);
}

using Ticks = std::vector<std::string>;

TEST(TickCalculatorTest, PlainLinesInUtc) {
  EXPECT_EQ(cron_ticks("30 2 * * *", "UTC", "2027-01-01T00:00:00Z", 2),
            (Ticks{"2027-01-01T02:30:00Z", "2027-01-02T02:30:00Z"}));
  EXPECT_EQ(cron_ticks("*/20 * * * * *", "UTC", "2027-01-01T00:00:05Z", 3),
            (Ticks{"2027-01-01T00:00:20Z", "2027-01-01T00:00:40Z", "2027-01-01T00:01:00Z"}));
  EXPECT_EQ(cron_ticks("@monthly", "UTC", "2027-01-31T12:00:00Z", 2),
            (Ticks{"2027-02-01T00:00:00Z", "2027-03-01T00:00:00Z"}));
  // A tick exactly at `after` is not after it.
  EXPECT_EQ(cron_ticks("0 * * * *", "UTC", "2027-01-01T05:00:00Z", 1),
            (Ticks{"2027-01-01T06:00:00Z"}));
}

TEST(TickCalculatorTest, DayFieldsFollowTheOrRule) {
  // 2027: Friday the 1st of January, then Fridays 8th, the 13th (a Wednesday), Friday 15th.
  EXPECT_EQ(cron_ticks("0 0 13 * fri", "UTC", "2027-01-01T12:00:00Z", 3),
            (Ticks{"2027-01-08T00:00:00Z", "2027-01-13T00:00:00Z", "2027-01-15T00:00:00Z"}));
  // Day of month starting with `*`: both must hold, odd days that are Mondays.
  EXPECT_EQ(cron_ticks("0 0 */2 * mon", "UTC", "2027-01-01T00:00:00Z", 2),
            (Ticks{"2027-01-11T00:00:00Z", "2027-01-25T00:00:00Z"}));
}

TEST(TickCalculatorTest, February29WaitsForALeapYear) {
  EXPECT_EQ(cron_ticks("0 0 29 2 *", "UTC", "2027-01-01T00:00:00Z", 2),
            (Ticks{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}));
}

// Berlin, spring: 02:00 CET becomes 03:00 CEST at 01:00 UTC on 2027-03-28.
TEST(TickCalculatorTest, BerlinSpringFixedTimeInTheSkippedHourFiresOnceAtTheChange) {
  EXPECT_EQ(cron_ticks("30 2 * * *", "Europe/Berlin", "2027-03-27T00:00:00Z", 3),
            (Ticks{"2027-03-27T01:30:00Z", "2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"}));
  // Two times in the skipped hour still fire once.
  EXPECT_EQ(cron_ticks("0,30 2 * * *", "Europe/Berlin", "2027-03-28T00:00:00Z", 2),
            (Ticks{"2027-03-28T01:00:00Z", "2027-03-29T00:00:00Z"}));
  EXPECT_EQ(cron_ticks("15 30 2 * * *", "Europe/Berlin", "2027-03-28T00:00:00Z", 1),
            (Ticks{"2027-03-28T01:00:00Z"}));
  // Just before and just after the gap are ordinary.
  EXPECT_EQ(cron_ticks("59 1 * * *", "Europe/Berlin", "2027-03-28T00:00:00Z", 1),
            (Ticks{"2027-03-28T00:59:00Z"}));
  EXPECT_EQ(cron_ticks("30 3 * * *", "Europe/Berlin", "2027-03-28T00:00:00Z", 1),
            (Ticks{"2027-03-28T01:30:00Z"}));
}

TEST(TickCalculatorTest, BerlinSpringWildcardFollowsElapsedTime) {
  EXPECT_EQ(cron_ticks("0 * * * *", "Europe/Berlin", "2027-03-27T23:30:00Z", 3),
            (Ticks{"2027-03-28T00:00:00Z", "2027-03-28T01:00:00Z", "2027-03-28T02:00:00Z"}));
  EXPECT_EQ(cron_ticks("*/30 * * * *", "Europe/Berlin", "2027-03-28T00:00:00Z", 3),
            (Ticks{"2027-03-28T00:30:00Z", "2027-03-28T01:00:00Z", "2027-03-28T01:30:00Z"}));
  // 00:00 CET, then 02:00 does not exist, then 04:00 CEST.
  EXPECT_EQ(cron_ticks("0 */2 * * *", "Europe/Berlin", "2027-03-27T22:30:00Z", 2),
            (Ticks{"2027-03-27T23:00:00Z", "2027-03-28T02:00:00Z"}));
}

// Berlin, autumn: 03:00 CEST becomes 02:00 CET at 01:00 UTC on 2027-10-31.
TEST(TickCalculatorTest, BerlinAutumnFixedTimeInTheRepeatedHourFiresOnce) {
  EXPECT_EQ(cron_ticks("30 2 * * *", "Europe/Berlin", "2027-10-30T00:00:00Z", 3),
            (Ticks{"2027-10-30T00:30:00Z", "2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"}));
  // Asked from inside the second pass, the first pass is over: tomorrow.
  EXPECT_EQ(cron_ticks("30 2 * * *", "Europe/Berlin", "2027-10-31T01:10:00Z", 1),
            (Ticks{"2027-11-01T01:30:00Z"}));
}

TEST(TickCalculatorTest, BerlinAutumnWildcardFiresInBothPasses) {
  EXPECT_EQ(cron_ticks("*/30 * * * *", "Europe/Berlin", "2027-10-31T00:00:00Z", 4),
            (Ticks{"2027-10-31T00:30:00Z", "2027-10-31T01:00:00Z", "2027-10-31T01:30:00Z",
                   "2027-10-31T02:00:00Z"}));
  EXPECT_EQ(cron_ticks("0 */2 * * *", "Europe/Berlin", "2027-10-30T21:30:00Z", 4),
            (Ticks{"2027-10-30T22:00:00Z", "2027-10-31T00:00:00Z", "2027-10-31T01:00:00Z",
                   "2027-10-31T03:00:00Z"}));
  EXPECT_EQ(cron_ticks("*/30 * * * *", "Europe/Berlin", "2027-10-31T01:10:00Z", 1),
            (Ticks{"2027-10-31T01:30:00Z"}));
}

// New York, spring: 02:00 EST becomes 03:00 EDT at 07:00 UTC on 2027-03-14.
TEST(TickCalculatorTest, NewYorkSpring) {
  EXPECT_EQ(cron_ticks("30 2 * * *", "America/New_York", "2027-03-13T12:00:00Z", 2),
            (Ticks{"2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z"}));
  EXPECT_EQ(cron_ticks("*/15 * * * *", "America/New_York", "2027-03-14T06:40:00Z", 2),
            (Ticks{"2027-03-14T06:45:00Z", "2027-03-14T07:00:00Z"}));
  EXPECT_EQ(cron_ticks("0 * * * *", "America/New_York", "2027-03-14T05:30:00Z", 3),
            (Ticks{"2027-03-14T06:00:00Z", "2027-03-14T07:00:00Z", "2027-03-14T08:00:00Z"}));
}

// New York, autumn: 02:00 EDT becomes 01:00 EST at 06:00 UTC on 2027-11-07.
TEST(TickCalculatorTest, NewYorkAutumn) {
  EXPECT_EQ(cron_ticks("30 1 * * *", "America/New_York", "2027-11-06T12:00:00Z", 2),
            (Ticks{"2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z"}));
  EXPECT_EQ(cron_ticks("30 1 * * *", "America/New_York", "2027-11-07T06:10:00Z", 1),
            (Ticks{"2027-11-08T06:30:00Z"}));
  EXPECT_EQ(cron_ticks("0 * * * *", "America/New_York", "2027-11-07T04:30:00Z", 3),
            (Ticks{"2027-11-07T05:00:00Z", "2027-11-07T06:00:00Z", "2027-11-07T07:00:00Z"}));
  EXPECT_EQ(cron_ticks("*/30 * * * *", "America/New_York", "2027-11-07T06:10:00Z", 1),
            (Ticks{"2027-11-07T06:30:00Z"}));
}

TEST(TickCalculatorTest, EveryCountsMultiplesOfTheIntervalSinceTheEpoch) {
  TickCalculator every30 = TickCalculator::every(Seconds(30));
  EXPECT_FALSE(every30.is_cron());
  EXPECT_EQ(ticks(every30, "2027-03-28T01:00:10Z", 3),
            (Ticks{"2027-03-28T01:00:30Z", "2027-03-28T01:01:00Z", "2027-03-28T01:01:30Z"}));
  // Time zones play no part: an hour is on the UTC hour, across a DST change too.
  EXPECT_EQ(ticks(TickCalculator::every(Seconds(3600)), "2027-03-28T00:59:59Z", 2),
            (Ticks{"2027-03-28T01:00:00Z", "2027-03-28T02:00:00Z"}));
  EXPECT_THROW(TickCalculator::every(Seconds(0)), std::invalid_argument);
}

TEST(TickCalculatorTest, UnknownTimeZoneIsAnErrorNamingIt) {
  EXPECT_NO_THROW(check_time_zone("Europe/Berlin"));
  try {
    TickCalculator::cron("* * * * *", "Europe/Berlim");
    ADD_FAILURE() << "no error";
  } catch (const TimeZoneError& e) {
    EXPECT_STREQ(e.what(),
                 "unknown time zone 'Europe/Berlim' (use an IANA name such as Europe/Berlin, "
                 "America/New_York or UTC)");
  }
}

TEST(TickCalculatorTest, FormatsAndParsesUtcAndLocalTimes) {
  Instant change = utc("2027-03-28T01:00:00Z");
  EXPECT_EQ(format_utc(change), "2027-03-28T01:00:00Z");
  EXPECT_EQ(format_local(change, "Europe/Berlin"), "2027-03-28 03:00:00 CEST");
  EXPECT_EQ(parse_instant("2027-03-28T03:00:00", "Europe/Berlin"), change);
  EXPECT_EQ(parse_instant("2027-03-28 03:00:00", "Europe/Berlin"), change);
  // A local time in the skipped hour reads as the change, one in a repeated hour as its
  // first pass.
  EXPECT_EQ(parse_instant("2027-03-28T02:30:00", "Europe/Berlin"), change);
  EXPECT_EQ(parse_instant("2027-10-31T02:30:00", "Europe/Berlin"), utc("2027-10-31T00:30:00Z"));
  EXPECT_THROW(parse_instant("tomorrow", "UTC"), std::invalid_argument);
  EXPECT_THROW(parse_instant("2027-03-28T03:00:00Zx", "UTC"), std::invalid_argument);
}

}  // namespace
}  // namespace pgjobd::schedule
