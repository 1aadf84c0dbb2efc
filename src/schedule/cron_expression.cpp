// The hand-written cron parser: splits the line into fields and each field into list items.
#include "schedule/cron_expression.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <vector>

#include "text/escape.hpp"

namespace pgjobd::schedule {
namespace {

struct FieldSpec {
  const char* name;
  unsigned min;
  unsigned max;  // inclusive; day of week allows 7 (Sunday again)
  const std::array<std::string_view, 12>* names = nullptr;
  unsigned first_name_value = 0;
};

constexpr std::array<std::string_view, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 12> kDayNames = {"sun", "mon", "tue", "wed",
                                                        "thu", "fri", "sat"};

constexpr FieldSpec kSecond{"second", 0, 59};
constexpr FieldSpec kMinute{"minute", 0, 59};
constexpr FieldSpec kHour{"hour", 0, 23};
constexpr FieldSpec kDay{"day of month", 1, 31};
constexpr FieldSpec kMonth{"month", 1, 12, &kMonthNames, 1};
constexpr FieldSpec kWeekday{"day of week", 0, 7, &kDayNames, 0};

struct Shorthand {
  std::string_view name;
  std::string_view line;
};
constexpr std::array<Shorthand, 7> kShorthands = {{
    {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
}};

[[noreturn]] void fail(const FieldSpec& field, std::string_view item, const std::string& what) {
  throw CronError(std::string(field.name) + " field " + single_quoted(item) + ": " + what);
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// A number or, where the field has them, a name.
unsigned parse_value(const FieldSpec& field, std::string_view item, std::string_view text) {
  if (text.empty()) fail(field, item, "missing a number");
  if (std::isalpha(static_cast<unsigned char>(text.front())) != 0) {
    if (field.names != nullptr) {
      std::string name = lower(text);
      for (std::size_t i = 0; i < field.names->size(); ++i) {
        if (!(*field.names)[i].empty() && (*field.names)[i] == name) {
          return field.first_name_value + static_cast<unsigned>(i);
        }
      }
    }
    fail(field, item,
         single_quoted(text) +
             (field.names != nullptr ? " is not a name here" : " is not a number") +
             " (L, W, # and ? are not supported)");
  }
  unsigned value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    fail(field, item, single_quoted(text) + " is not a number (L, W, # and ? are not supported)");
  }
  if (value < field.min || value > field.max) {
    fail(field, item,
         std::to_string(value) + " is out of range " + std::to_string(field.min) + "-" +
             std::to_string(field.max));
  }
  return value;
}

// One list item: `*`, `N`, `N-M`, each optionally `/S`.
void parse_item(const FieldSpec& field, std::string_view item, std::vector<bool>& set) {
  if (item.empty()) fail(field, item, "empty list item");
  std::string_view range = item;
  unsigned step = 1;
  std::string_view::size_type slash = item.find('/');
  bool stepped = slash != std::string_view::npos;
  if (stepped) {
    range = item.substr(0, slash);
    std::string_view step_text = item.substr(slash + 1);
    auto [end, error] =
        std::from_chars(step_text.data(), step_text.data() + step_text.size(), step);
    if (step_text.empty() || error != std::errc() || end != step_text.data() + step_text.size() ||
        step == 0) {
      fail(field, item, "the step after / must be a positive number");
    }
    if (step > field.max) {
      fail(field, item, "step " + std::to_string(step) + " is larger than the field's range");
    }
  }
  unsigned first = field.min;
  unsigned last = field.max == 7 ? 6 : field.max;  // `*` in day of week is 0-6
  if (range != "*") {
    std::string_view::size_type dash = range.find('-');
    if (dash == std::string_view::npos) {
      first = parse_value(field, item, range);
      // `N/S` is `N-max/S` (cronie, Quartz); a plain `N` is just N.
      last = stepped ? last : first;
    } else {
      first = parse_value(field, item, range.substr(0, dash));
      last = parse_value(field, item, range.substr(dash + 1));
      if (first > last) {
        fail(field, item, "range start is after its end (wrap-around ranges are not supported)");
      }
    }
  }
  for (unsigned value = first; value <= last; value += step) set[value] = true;
}

template <std::size_t kBits>
std::bitset<kBits> parse_field(const FieldSpec& field, std::string_view text, bool& star) {
  star = text.starts_with('*');
  std::vector<bool> set(field.max + 1, false);
  std::string_view rest = text;
  while (true) {
    std::string_view::size_type comma = rest.find(',');
    parse_item(field, rest.substr(0, comma), set);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  std::bitset<kBits> bits;
  for (unsigned value = field.min; value <= field.max; ++value) {
    if (set[value]) bits.set(field.max == 7 && value == 7 ? 0 : value);
  }
  return bits;
}

std::vector<std::string_view> split_fields(std::string_view text) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    std::size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) fields.push_back(text.substr(start, i - start));
  }
  return fields;
}

// Days in each month at most (February 29 in leap years).
constexpr std::array<unsigned, 13> kMaxDays = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

}  // namespace

bool CronExpression::day_matches(unsigned day_of_month, unsigned weekday) const {
  bool day = days[day_of_month];
  bool week = weekdays[weekday];
  // Standard cron: two restricted day fields match either; otherwise the `*` one matches all.
  if (!day_star && !weekday_star) return day || week;
  return day && week;
}

CronExpression parse_cron(std::string_view text) {
  std::string_view line = text;
  std::string shorthand_line;
  if (text.starts_with('@')) {
    std::string name = lower(text);
    auto it = std::find_if(kShorthands.begin(), kShorthands.end(),
                           [&](const Shorthand& s) { return s.name == name; });
    if (it == kShorthands.end()) {
      throw CronError("unknown shorthand " + single_quoted(text) +
                      " (use @yearly, @annually, @monthly, @weekly, @daily, @midnight or "
                      "@hourly)");
    }
    line = it->line;
  }
  std::vector<std::string_view> fields = split_fields(line);
  if (fields.size() != 5 && fields.size() != 6) {
    throw CronError(
        "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with "
        "leading seconds, got " +
        std::to_string(fields.size()) + " in " + single_quoted(text));
  }
  CronExpression cron;
  std::size_t i = 0;
  bool unused_star = false;
  if (fields.size() == 6) {
    cron.has_seconds = true;
    cron.seconds = parse_field<60>(kSecond, fields[i++], unused_star);
  } else {
    cron.seconds.set(0);
  }
  cron.minutes = parse_field<60>(kMinute, fields[i++], cron.minute_star);
  cron.hours = parse_field<24>(kHour, fields[i++], cron.hour_star);
  cron.days = parse_field<32>(kDay, fields[i++], cron.day_star);
  cron.months = parse_field<13>(kMonth, fields[i++], unused_star);
  cron.weekdays = parse_field<7>(kWeekday, fields[i++], cron.weekday_star);

  // With the day of week restricted too, the OR rule lets any month fire on its weekdays.
  if (cron.day_star || cron.weekday_star) {
    bool possible = false;
    for (unsigned month = 1; month <= 12 && !possible; ++month) {
      if (!cron.months[month]) continue;
      for (unsigned day = 1; day <= kMaxDays[month] && !possible; ++day) possible = cron.days[day];
    }
    if (!possible) {
      throw CronError("no month of " + single_quoted(text) +
                      " has any of its days of month: it would "
                      "never fire");
    }
  }
  return cron;
}

}  // namespace pgjobd::schedule
