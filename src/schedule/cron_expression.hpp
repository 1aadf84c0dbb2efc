#pragma once
// A cron line parsed by hand (no Debian package offers a parser). The accepted subset is
// Vixie/ISC cron's: 5 fields (minute hour day-of-month month day-of-week) or 6 with a
// leading seconds field; each field a list of `*`, `N`, `N-M`, `*/S`, `N-M/S` or `N/S`
// (= `N-max/S`); month names jan..dec and day names sun..sat (any case); day of week 0-7
// with both 0 and 7 Sunday; the shorthands @yearly @annually @monthly @weekly @daily
// @midnight @hourly. Not accepted: `L`, `W`, `#`, `?`, @reboot, wrap-around ranges.

#include <bitset>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pgjobd::schedule {

// A cron line that cannot be parsed; what() names the field and the bad text.
class CronError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct CronExpression {
  std::bitset<60> seconds;  // {0} for a 5-field line
  std::bitset<60> minutes;
  std::bitset<24> hours;
  std::bitset<32> days;     // 1..31
  std::bitset<13> months;   // 1..12
  std::bitset<7> weekdays;  // 0..6, Sunday = 0 (7 folds into 0)
  // The field was written starting with `*` (`*` or `*/S`). Standard cron's rules read them:
  // when both day fields are restricted a day matches either (the OR rule), otherwise both;
  // and ISC cron's DST rules treat a line whose minute or hour starts with `*` as a
  // "wildcard" entry that follows real elapsed time (tick_calculator.hpp).
  bool day_star = false;
  bool weekday_star = false;
  bool minute_star = false;
  bool hour_star = false;
  bool has_seconds = false;

  bool wildcard() const { return minute_star || hour_star; }
  bool day_matches(unsigned day_of_month, unsigned weekday) const;
  bool operator==(const CronExpression&) const = default;
};

// Parses `text`; throws CronError. A line that can never fire ("0 0 30 2 *") is an error.
CronExpression parse_cron(std::string_view text);

}  // namespace pgjobd::schedule
