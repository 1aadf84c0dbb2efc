// Ticks of cron lines in time zones (Howard Hinnant's date/tz over the system's tzdata:
// GCC 12's <chrono> has no time zones) and of fixed intervals.
#include "schedule/tick_calculator.hpp"

// GCC 12 reads date.h's parser (from_stream) as using a variable it has not set when it
// inlines it with the other files of a unity batch: a false positive in the library.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <date/tz.h>
#pragma GCC diagnostic pop
#else
#include <date/tz.h>
#endif

#include <algorithm>
#include <sstream>

namespace pgjobd::schedule {
namespace {

using date::local_days;
using date::local_seconds;
using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;

// How far ahead a tick is looked for: "0 0 29 2 *" waits up to 8 years (no February 29 in
// 2100); the parser refuses lines that can never fire.
constexpr auto kHorizon = days(366 * 9);

const date::time_zone* find_zone(std::string_view name) {
  try {
    return date::locate_zone(name);
  } catch (const std::exception&) {
    throw TimeZoneError("unknown time zone '" + std::string(name) +
                        "' (use an IANA name such as Europe/Berlin, America/New_York or UTC)");
  }
}

// The first local time at or after `from` that matches every field, or nullopt past `limit`.
std::optional<local_seconds> next_local_match(const CronExpression& cron, local_seconds from,
                                              local_seconds limit) {
  local_seconds t = from;
  while (t <= limit) {
    local_days day = std::chrono::floor<days>(t);
    date::year_month_day ymd{day};
    if (!cron.months[static_cast<unsigned>(ymd.month())]) {
      t = local_days{(ymd.year() / ymd.month() + date::months(1)) / 1};
      continue;
    }
    if (!cron.day_matches(static_cast<unsigned>(ymd.day()), date::weekday{day}.c_encoding())) {
      t = day + days(1);
      continue;
    }
    date::hh_mm_ss<Seconds> time{t - day};
    auto hour = static_cast<std::size_t>(time.hours().count());
    auto minute = static_cast<std::size_t>(time.minutes().count());
    auto second = static_cast<std::size_t>(time.seconds().count());
    if (!cron.hours[hour]) {
      t = day + hours(hour + 1);
    } else if (!cron.minutes[minute]) {
      t = day + hours(hour) + minutes(minute + 1);
    } else if (!cron.seconds[second]) {
      t += Seconds(1);
    } else {
      return t;
    }
  }
  return std::nullopt;
}

// The instants a matching local time stands for under ISC cron's DST rules, earliest first;
// `count` 0 when it stands for none (a wildcard line in a skipped hour).
struct Instants {
  Instant first;
  Instant second;
  int count = 0;
};

Instants instants_of(const CronExpression& cron, const date::time_zone& zone, local_seconds local) {
  date::local_info info = zone.get_info(local);
  Instants out;
  switch (info.result) {
    case date::local_info::unique:
      out.first = Instant(local.time_since_epoch() - info.first.offset);
      out.count = 1;
      break;
    case date::local_info::nonexistent:
      // A skipped hour: a fixed-time line fires once, when the clocks change.
      if (!cron.wildcard()) {
        out.first = info.second.begin;
        out.count = 1;
      }
      break;
    case date::local_info::ambiguous:
      // A repeated hour: a fixed-time line fires in the first pass only.
      out.first = Instant(local.time_since_epoch() - info.first.offset);
      out.second = Instant(local.time_since_epoch() - info.second.offset);
      out.count = cron.wildcard() ? 2 : 1;
      break;
  }
  return out;
}

}  // namespace

TickCalculator TickCalculator::cron(std::string_view line, std::string_view time_zone) {
  TickCalculator calculator;
  calculator.cron_ = parse_cron(line);
  calculator.zone_ = find_zone(time_zone);
  return calculator;
}

TickCalculator TickCalculator::every(Seconds interval) {
  if (interval < Seconds(1)) throw std::invalid_argument("an interval must be at least 1s");
  TickCalculator calculator;
  calculator.interval_ = interval;
  return calculator;
}

std::optional<Instant> TickCalculator::next_after(Instant after) const {
  if (zone_ == nullptr) {
    // Multiples of the interval since the epoch; floor handles instants before 1970 too.
    auto periods = std::chrono::floor<Seconds>(after.time_since_epoch()).count();
    auto n = periods / interval_.count();
    if (periods % interval_.count() < 0) --n;
    return Instant((n + 1) * interval_);
  }
  // A local time can stand for a later instant than `after` while being earlier on the clock
  // than `after`'s own local time only when the offset drops (a repeated hour): start the
  // scan at the local time of `after` under the smaller of its offset and the next one.
  // Only a change closer than the drop itself matters; using the smaller offset always would
  // rescan an hour of a per-second line on every tick for half the year.
  date::sys_info now = zone_->get_info(after);
  Seconds offset = now.offset;
  if (now.end < Instant::max()) {
    Seconds next_offset = zone_->get_info(now.end).offset;
    if (next_offset < offset && now.end - after < offset - next_offset) offset = next_offset;
  }
  local_seconds from{after.time_since_epoch() + offset};
  local_seconds limit = from + kHorizon;

  std::optional<Instant> best;
  while (auto local = next_local_match(cron_, from, limit)) {
    Instants found = instants_of(cron_, *zone_, *local);
    // The earliest instant of each matching local time never decreases as the local time
    // grows, so once it reaches the best found no later local time can beat it.
    if (best && found.count > 0 && found.first >= *best) break;
    for (int i = 0; i < found.count; ++i) {
      Instant instant = i == 0 ? found.first : found.second;
      if (instant > after && (!best || instant < *best)) best = instant;
    }
    from = *local + Seconds(1);
  }
  return best;
}

void check_time_zone(std::string_view name) { find_zone(name); }

std::string format_local(Instant instant, std::string_view time_zone) {
  return date::format("%F %T %Z", date::make_zoned(find_zone(time_zone), instant));
}

std::string format_utc(Instant instant) { return date::format("%FT%TZ", instant); }

Instant parse_instant(std::string_view text, std::string_view time_zone) {
  std::string value(text);
  bool utc = !value.empty() && (value.back() == 'Z' || value.back() == 'z');
  if (utc) value.pop_back();
  std::replace(value.begin(), value.end(), 'T', ' ');
  std::istringstream in(value);
  local_seconds local;
  in >> date::parse("%F %T", local);
  if (in.fail() || in.peek() != std::char_traits<char>::eof()) {
    throw std::invalid_argument("bad time '" + std::string(text) +
                                "' (use 2027-03-28T01:30:00Z, or 2027-03-28 03:30:00 for the "
                                "schedule's time zone)");
  }
  if (utc) return Instant(local.time_since_epoch());
  // A local time in a skipped hour reads as the change; in a repeated hour, the first pass.
  date::local_info info = find_zone(time_zone)->get_info(local);
  if (info.result == date::local_info::nonexistent) return info.second.begin;
  return Instant(local.time_since_epoch() - info.first.offset);
}

}  // namespace pgjobd::schedule
