// Parses and formats the durations written in the config file: "250ms", "5s", "10m", "1h", "7d".
#include "pgjobd/duration.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <stdexcept>

#include "text/escape.hpp"

namespace pgjobd {
namespace {

struct Unit {
  std::string_view suffix;
  std::int64_t millis;
};

// Largest first, so format_duration picks the largest unit that is exact.
constexpr std::array<Unit, 5> kUnits{{
    {"d", 86'400'000},
    {"h", 3'600'000},
    {"m", 60'000},
    {"s", 1'000},
    {"ms", 1},
}};

// Longer is surely a typo, and would overflow the int64 nanosecond clocks (~292 years) that
// deadlines are computed on.
constexpr std::int64_t kMaxMillis = 36'500LL * 86'400'000;  // 100 years

constexpr std::string_view kUse = "use 250ms, 5s, 10m, 1h or 7d";

// The text is quoted escaped: a NUL in it would cut what() short, a newline split the line.
[[noreturn]] void fail(std::string_view text, std::string_view why) {
  throw std::invalid_argument("bad duration '" + escape_control_characters(text) + "' (" +
                              std::string(why) + ")");
}

const Unit* find_unit(std::string_view suffix) {
  for (const Unit& unit : kUnits) {
    if (unit.suffix == suffix) return &unit;
  }
  return nullptr;
}

std::size_t count_digits(std::string_view text) {
  std::size_t n = 0;
  while (n < text.size() && std::isdigit(static_cast<unsigned char>(text[n])) != 0) ++n;
  return n;
}

// Whole `digits` as an int64, or -1 if they do not fit.
std::int64_t to_int(std::string_view digits) {
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size()) return -1;
  return value;
}

// For "1.5s" returns "1500ms": what to write instead, when the fraction is a whole number of
// milliseconds. Empty when there is no exact equivalent.
std::string fraction_hint(std::string_view whole, std::string_view rest) {
  std::size_t fraction_digits = count_digits(rest);
  const Unit* unit = find_unit(rest.substr(fraction_digits));
  if (unit == nullptr || fraction_digits == 0 || fraction_digits > 9) return {};
  std::int64_t whole_value = to_int(whole);
  if (whole_value < 0 || whole_value > kMaxMillis / unit->millis) return {};
  std::int64_t scale = 1;
  for (std::size_t i = 0; i < fraction_digits; ++i) scale *= 10;
  // fraction < 1e9 and millis ≤ 8.64e7, so the product fits in int64.
  std::int64_t fraction = to_int(rest.substr(0, fraction_digits)) * unit->millis;
  if (fraction % scale != 0) return {};
  // "36500.5d" is exact in minutes but too long: suggesting it would only earn a new error.
  const std::int64_t total = whole_value * unit->millis + fraction / scale;
  if (total > kMaxMillis) return {};
  return format_duration(Millis(total));
}

}  // namespace

Millis parse_duration(std::string_view text) {
  if (text.empty()) fail(text, "empty; " + std::string(kUse));
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      fail(text, "no spaces; " + std::string(kUse));
    }
  }
  if (text.front() == '-') fail(text, "must not be negative");
  std::size_t digits = count_digits(text);
  if (digits == 0) fail(text, kUse);
  std::string_view number = text.substr(0, digits);
  std::string_view suffix = text.substr(digits);

  if (!suffix.empty() && suffix.front() == '.') {
    std::string hint = fraction_hint(number, suffix.substr(1));
    if (!hint.empty()) fail(text, "no fractions: write " + hint);
    fail(text, "no fractions: use a whole number of a smaller unit, e.g. 1500ms for 1.5s");
  }
  if (suffix.empty()) {
    // "0" is the same in every unit, so it needs none; any other bare number is ambiguous.
    if (number.find_first_not_of('0') == std::string_view::npos) return Millis(0);
    fail(text, "missing unit; " + std::string(kUse));
  }
  const Unit* unit = find_unit(suffix);
  if (unit == nullptr) fail(text, kUse);
  std::int64_t value = to_int(number);
  if (value < 0 || value > kMaxMillis / unit->millis) fail(text, "too long; at most 36500d");
  return Millis(value * unit->millis);
}

std::string format_duration(Millis duration) {
  std::int64_t count = duration.count();
  if (count == 0) return "0";
  // Unsigned, so that the magnitude of the most negative value does not overflow.
  std::uint64_t magnitude =
      count < 0 ? 0 - static_cast<std::uint64_t>(count) : static_cast<std::uint64_t>(count);
  std::string sign = count < 0 ? "-" : "";
  for (const Unit& unit : kUnits) {
    auto unit_millis = static_cast<std::uint64_t>(unit.millis);
    if (magnitude % unit_millis == 0) {
      return sign + std::to_string(magnitude / unit_millis) + std::string(unit.suffix);
    }
  }
  return sign + std::to_string(magnitude) + "ms";  // unreachable: every count is whole ms
}

}  // namespace pgjobd
