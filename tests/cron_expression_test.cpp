// The hand-written cron parser: every field form, names, shorthands, the day OR rule and the
// errors it gives for what it does not accept.
#include "schedule/cron_expression.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pgjobd::schedule {
namespace {

template <std::size_t kBits>
std::vector<unsigned> values(const std::bitset<kBits>& bits) {
  std::vector<unsigned> out;
  for (unsigned i = 0; i < kBits; ++i) {
    if (bits[i]) out.push_back(i);
  }
  return out;
}

std::vector<unsigned> range(unsigned first, unsigned last, unsigned step = 1) {
  std::vector<unsigned> out;
  for (unsigned i = first; i <= last; i += step) out.push_back(i);
  return out;
}

std::string error_of(const std::string& line) {
  try {
    parse_cron(line);
  } catch (const CronError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CronExpressionTest, FiveFieldsReadMinuteHourDayMonthWeekdayWithSecondZero) {
  CronExpression cron = parse_cron("30 2 15 6 3");
  EXPECT_FALSE(cron.has_seconds);
  EXPECT_EQ(values(cron.seconds), std::vector<unsigned>{0});
  EXPECT_EQ(values(cron.minutes), std::vector<unsigned>{30});
  EXPECT_EQ(values(cron.hours), std::vector<unsigned>{2});
  EXPECT_EQ(values(cron.days), std::vector<unsigned>{15});
  EXPECT_EQ(values(cron.months), std::vector<unsigned>{6});
  EXPECT_EQ(values(cron.weekdays), std::vector<unsigned>{3});
  EXPECT_FALSE(cron.wildcard());
}

TEST(CronExpressionTest, SixFieldsStartWithSeconds) {
  CronExpression cron = parse_cron("*/5 * * * * *");
  EXPECT_TRUE(cron.has_seconds);
  EXPECT_EQ(values(cron.seconds), range(0, 55, 5));
  EXPECT_EQ(values(cron.minutes), range(0, 59));
  EXPECT_TRUE(cron.wildcard());
}

TEST(CronExpressionTest, StarRangeStepListAndStartWithStep) {
  EXPECT_EQ(values(parse_cron("* * * * *").hours), range(0, 23));
  EXPECT_EQ(values(parse_cron("10-20 * * * *").minutes), range(10, 20));
  EXPECT_EQ(values(parse_cron("10-50/15 * * * *").minutes), (std::vector<unsigned>{10, 25, 40}));
  EXPECT_EQ(values(parse_cron("0 */6 * * *").hours), (std::vector<unsigned>{0, 6, 12, 18}));
  EXPECT_EQ(values(parse_cron("5/20 * * * *").minutes), (std::vector<unsigned>{5, 25, 45}));
  EXPECT_EQ(values(parse_cron("1,5,10-12,30-40/5 * * * *").minutes),
            (std::vector<unsigned>{1, 5, 10, 11, 12, 30, 35, 40}));
  EXPECT_EQ(values(parse_cron("0 0 1,31 * *").days), (std::vector<unsigned>{1, 31}));
  EXPECT_EQ(values(parse_cron("0 0 * */3 *").months), (std::vector<unsigned>{1, 4, 7, 10}));
}

TEST(CronExpressionTest, MonthAndDayNamesInAnyCaseAndSevenIsSunday) {
  EXPECT_EQ(values(parse_cron("0 0 * JAN,jul-Sep *").months), (std::vector<unsigned>{1, 7, 8, 9}));
  EXPECT_EQ(values(parse_cron("0 0 * * mon-FRI").weekdays), range(1, 5));
  EXPECT_EQ(values(parse_cron("0 0 * * sun").weekdays), std::vector<unsigned>{0});
  EXPECT_EQ(values(parse_cron("0 0 * * 7").weekdays), std::vector<unsigned>{0});
  EXPECT_EQ(values(parse_cron("0 0 * * 5-7").weekdays), (std::vector<unsigned>{0, 5, 6}));
  EXPECT_EQ(values(parse_cron("0 0 * * *").weekdays), range(0, 6));
}

TEST(CronExpressionTest, ShorthandsAreTheirStandardLines) {
  EXPECT_EQ(parse_cron("@yearly"), parse_cron("0 0 1 1 *"));
  EXPECT_EQ(parse_cron("@annually"), parse_cron("0 0 1 1 *"));
  EXPECT_EQ(parse_cron("@monthly"), parse_cron("0 0 1 * *"));
  EXPECT_EQ(parse_cron("@weekly"), parse_cron("0 0 * * 0"));
  EXPECT_EQ(parse_cron("@daily"), parse_cron("0 0 * * *"));
  EXPECT_EQ(parse_cron("@midnight"), parse_cron("0 0 * * *"));
  EXPECT_EQ(parse_cron("@HOURLY"), parse_cron("0 * * * *"));
}

TEST(CronExpressionTest, ExtraBlanksBetweenFieldsAreAllowed) {
  EXPECT_EQ(parse_cron("  30\t2  * *   *  "), parse_cron("30 2 * * *"));
}

TEST(CronExpressionTest, DayFieldsMatchEitherWhenBothAreRestricted) {
  CronExpression both = parse_cron("0 0 13 * 5");  // the 13th, and every Friday
  EXPECT_TRUE(both.day_matches(13, 2));
  EXPECT_TRUE(both.day_matches(3, 5));
  EXPECT_FALSE(both.day_matches(3, 2));
  // A field starting with `*` (even `*/2`) is not restricted: both must match.
  CronExpression stepped = parse_cron("0 0 */2 * 1");
  EXPECT_TRUE(stepped.day_matches(3, 1));
  EXPECT_FALSE(stepped.day_matches(3, 2));
  EXPECT_FALSE(stepped.day_matches(4, 1));
  CronExpression day_only = parse_cron("0 0 13 * *");
  EXPECT_TRUE(day_only.day_matches(13, 2));
  EXPECT_FALSE(day_only.day_matches(12, 2));
}

TEST(CronExpressionTest, WildcardMeansMinuteOrHourStartsWithStar) {
  EXPECT_TRUE(parse_cron("0 */2 * * *").wildcard());
  EXPECT_TRUE(parse_cron("*/15 3 * * *").wildcard());
  EXPECT_FALSE(parse_cron("0,30 2-4 * * *").wildcard());
  EXPECT_FALSE(parse_cron("* 30 2 * * *").wildcard());  // the seconds field does not count
}

TEST(CronExpressionTest, BadLinesNameTheFieldAndTheText) {
  EXPECT_EQ(error_of(""),
            "expected 5 fields (minute hour day-of-month month day-of-week) or "
            "6 with leading seconds, got 0 in ''");
  EXPECT_EQ(error_of("* * * *"),
            "expected 5 fields (minute hour day-of-month month "
            "day-of-week) or 6 with leading seconds, got 4 in '* * * *'");
  EXPECT_EQ(error_of("60 * * * *"), "minute field '60': 60 is out of range 0-59");
  EXPECT_EQ(error_of("0 24 * * *"), "hour field '24': 24 is out of range 0-23");
  EXPECT_EQ(error_of("0 0 0 * *"), "day of month field '0': 0 is out of range 1-31");
  EXPECT_EQ(error_of("0 0 * 13 *"), "month field '13': 13 is out of range 1-12");
  EXPECT_EQ(error_of("0 0 * * 8"), "day of week field '8': 8 is out of range 0-7");
  EXPECT_EQ(error_of("61 0 0 * * *"), "second field '61': 61 is out of range 0-59");
  EXPECT_EQ(error_of("*/0 * * * *"),
            "minute field '*/0': the step after / must be a positive "
            "number");
  EXPECT_EQ(error_of("*/x * * * *"),
            "minute field '*/x': the step after / must be a positive "
            "number");
  EXPECT_EQ(error_of("*/61 * * * *"),
            "minute field '*/61': step 61 is larger than the field's range");
  EXPECT_EQ(error_of("50-10 * * * *"),
            "minute field '50-10': range start is after its end "
            "(wrap-around ranges are not supported)");
  EXPECT_EQ(error_of("1,,2 * * * *"), "minute field '': empty list item");
  EXPECT_EQ(error_of("0 0 * foo *"),
            "month field 'foo': 'foo' is not a name here (L, W, # and ? are not supported)");
  EXPECT_EQ(error_of("0 0 L * *"),
            "day of month field 'L': 'L' is not a number (L, W, # and ? are not supported)");
  EXPECT_EQ(error_of("0 0 15W * *"),
            "day of month field '15W': '15W' is not a number (L, W, # and ? are not supported)");
  EXPECT_EQ(error_of("0 0 * * 5#3"),
            "day of week field '5#3': '5#3' is not a number (L, W, # and ? are not supported)");
  EXPECT_EQ(error_of("0 0 ? * 1"),
            "day of month field '?': '?' is not a number (L, W, # and ? are not supported)");
  EXPECT_EQ(error_of("0 0 1-x * *"),
            "day of month field '1-x': 'x' is not a number (L, W, # and ? are not supported)");
  EXPECT_EQ(error_of("0 0 - * *"), "day of month field '-': missing a number");
  EXPECT_EQ(error_of("@reboot"),
            "unknown shorthand '@reboot' (use @yearly, @annually, "
            "@monthly, @weekly, @daily, @midnight or @hourly)");
}

TEST(CronExpressionTest, ALineThatCanNeverFireIsAnError) {
  EXPECT_EQ(error_of("0 0 30 2 *"),
            "no month of '0 0 30 2 *' has any of its days of month: it would never fire");
  EXPECT_EQ(error_of("0 0 31 apr,jun,sep,nov *"),
            "no month of '0 0 31 apr,jun,sep,nov *' has any of its days of month: it would "
            "never fire");
  // February 29 exists in leap years; with a weekday as well the OR rule fires on Mondays.
  EXPECT_NO_THROW(parse_cron("0 0 29 2 *"));
  EXPECT_NO_THROW(parse_cron("0 0 30 2 1"));
}

}  // namespace
}  // namespace pgjobd::schedule
