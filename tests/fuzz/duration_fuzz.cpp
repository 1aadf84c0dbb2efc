// Fuzzes the config's duration syntax ("250ms", "5s", "7d"): parse_duration on any text,
// format_duration on any count, and the round trips between them.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "pgjobd/duration.hpp"
#include "text/escape.hpp"

namespace {

using pgjobd::format_duration;
using pgjobd::Millis;
using pgjobd::parse_duration;

constexpr std::int64_t kMaxMillis = 36'500LL * 86'400'000;  // duration.cpp: 100 years

// A parsed duration is in range, and its canonical text parses back to it and is a fixed
// point of format(parse(·)).
void check_parsed(Millis value) {
  FUZZ_CHECK(value.count() >= 0 && value.count() <= kMaxMillis);
  const std::string text = format_duration(value);
  FUZZ_CHECK(parse_duration(text) == value);
  FUZZ_CHECK(format_duration(parse_duration(text)) == text);
}

// Bad text fails with std::invalid_argument "bad duration '<text>' (<why>)"; a fraction
// with an exact equivalent suggests it ("write 1500ms"), and the suggestion must be valid.
void check_rejected(std::string_view text, const std::invalid_argument& e) {
  std::string_view what = e.what();
  const std::string quoted = "bad duration '" + pgjobd::escape_control_characters(text) + "' (";
  FUZZ_CHECK(what.starts_with(quoted) && what.ends_with(")"));
  const std::string_view why = what.substr(quoted.size(), what.size() - quoted.size() - 1);
  constexpr std::string_view kWrite = "no fractions: write ";
  if (why.starts_with(kWrite)) check_parsed(parse_duration(why.substr(kWrite.size())));
}

void check_text(std::string_view text) {
  Millis value{};
  try {
    value = parse_duration(text);
  } catch (const std::invalid_argument& e) {
    check_rejected(text, e);
    return;
  }
  check_parsed(value);
}

// Any count formats without overflow (even the most negative); in range, it round-trips.
void check_count(std::int64_t count) {
  const std::string text = format_duration(Millis(count));
  if (count >= 0 && count <= kMaxMillis) {
    FUZZ_CHECK(parse_duration(text) == Millis(count));
  } else {
    try {
      (void)parse_duration(text);
      FUZZ_CHECK(!"out-of-range duration parsed");
    } catch (const std::invalid_argument&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_text(std::string_view(reinterpret_cast<const char*>(data), size));
  if (size >= sizeof(std::int64_t)) {
    std::int64_t count = 0;
    std::memcpy(&count, data, sizeof count);
    check_count(count);
  }
  return 0;
}
