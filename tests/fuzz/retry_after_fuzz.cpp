// Fuzzes parse_retry_after, which reads a Retry-After header from any HTTP peer:
// delay-seconds or an HTTP-date (curl_getdate), saturated at kMaxRetryAfter.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "handlers/http_handler.hpp"

namespace {

using pgjobd::kMaxRetryAfter;
using pgjobd::Millis;
using pgjobd::parse_retry_after;

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// delay-seconds as the RFC means it, computed without overflow: the expected result.
std::optional<Millis> expected_seconds(std::string_view digits) {
  constexpr std::uint64_t kMaxSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(kMaxRetryAfter).count();
  std::uint64_t seconds = 0;
  for (char c : digits) {
    seconds = seconds * 10 + static_cast<std::uint64_t>(c - '0');
    if (seconds > kMaxSeconds) return kMaxRetryAfter;
  }
  return Millis(static_cast<std::int64_t>(seconds) * 1000);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view value(reinterpret_cast<const char*>(data), size);
  const std::optional<Millis> delay = parse_retry_after(value);
  // Whatever the peer sends, the delay is never negative and never beyond the cap.
  if (delay) FUZZ_CHECK(*delay >= Millis(0) && *delay <= kMaxRetryAfter);

  const std::string_view trimmed = trim(value);
  if (trimmed.empty()) FUZZ_CHECK(!delay);
  if (!trimmed.empty() && std::all_of(trimmed.begin(), trimmed.end(), is_digit)) {
    FUZZ_CHECK(delay == expected_seconds(trimmed));
  }
  // Neither delay-seconds nor a date (which starts with a day or month name): "-5", "1.5".
  if (!trimmed.empty() && !is_digit(trimmed.front()) &&
      !std::isalpha(static_cast<unsigned char>(trimmed.front()))) {
    FUZZ_CHECK(!delay);
  }
  return 0;
}
