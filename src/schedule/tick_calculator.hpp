#pragma once
// When a schedule's ticks fall: a cron line read in an IANA time zone, or a fixed interval.
//
// Daylight-saving time follows ISC cron's rules (cron.c, "DST changes"):
//  - a fixed-time line (minute and hour fields both not starting with `*`) whose time falls
//    in a skipped hour fires once, at the instant the clocks change;
//  - a fixed-time line whose time falls in a repeated hour fires once, in the first pass;
//  - a wildcard line (minute or hour starting with `*`, e.g. `*/15 * * * *`, `0 */2 * * *`)
//    follows real elapsed time: it fires in both passes of a repeated hour and not at all
//    in a skipped one.
// An `every:` interval ignores time zones: its ticks are the multiples of the interval since
// 1970-01-01 00:00:00 UTC, so every daemon computes the same ticks without sharing a start.

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "schedule/cron_expression.hpp"

namespace date {
class time_zone;
}

namespace pgjobd::schedule {

using Seconds = std::chrono::seconds;
using Instant = std::chrono::sys_seconds;

// An unknown time zone name.
class TimeZoneError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class TickCalculator {
 public:
  // A cron line in `time_zone` (an IANA name from the system's tz database, e.g.
  // "Europe/Berlin"; "UTC"). Throws CronError or TimeZoneError.
  static TickCalculator cron(std::string_view line, std::string_view time_zone);
  // Every `interval` (≥ 1 s). Throws std::invalid_argument.
  static TickCalculator every(Seconds interval);

  // The first tick strictly after `after`; nullopt when none within the next 9 years (which
  // only a line the parser refuses could cause).
  std::optional<Instant> next_after(Instant after) const;

  bool is_cron() const { return zone_ != nullptr; }

 private:
  TickCalculator() = default;

  CronExpression cron_;
  const date::time_zone* zone_ = nullptr;  // the tz database's, alive as long as the process
  Seconds interval_{0};
};

// Checks a time zone name; throws TimeZoneError naming it.
void check_time_zone(std::string_view name);

// "2027-03-28 03:00:00 CEST" (local time in `time_zone`) and "2027-03-28T01:00:00Z" (UTC).
std::string format_local(Instant instant, std::string_view time_zone);
std::string format_utc(Instant instant);

// Parses "2027-03-28T01:00:00Z" (UTC, with the Z) or "2027-03-28T03:00:00" / "2027-03-28
// 03:00:00" (local time in `time_zone`). Throws std::invalid_argument.
Instant parse_instant(std::string_view text, std::string_view time_zone);

}  // namespace pgjobd::schedule
