// Reading numbers from result fields with std::from_chars.

#include "db/field_values.hpp"

#include <charconv>
#include <system_error>

namespace pgjobd {

std::optional<double> parse_float8(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [parsed_to, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || parsed_to != end || text.empty()) return std::nullopt;
  return value;
}

std::optional<std::vector<std::int64_t>> parse_bigint_array(std::string_view text) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return std::nullopt;
  std::vector<std::int64_t> values;
  const char* at = text.data() + 1;
  const char* const end = text.data() + text.size() - 1;
  while (at < end) {
    std::int64_t value = 0;
    const auto [parsed_to, error] = std::from_chars(at, end, value);
    if (error != std::errc() || (parsed_to != end && *parsed_to != ',')) return std::nullopt;
    values.push_back(value);
    at = parsed_to == end ? end : parsed_to + 1;
    if (at == end && parsed_to != end) return std::nullopt;  // a trailing comma
  }
  return values;
}

double field_as_double(const pqxx::field& field) {
  if (!field.is_null()) {
    if (const auto value = parse_float8({field.c_str(), field.size()})) return *value;
  }
  return field.as<double>();
}

}  // namespace pgjobd
