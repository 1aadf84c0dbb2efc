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

double field_as_double(const pqxx::field& field) {
  if (!field.is_null()) {
    if (const auto value = parse_float8({field.c_str(), field.size()})) return *value;
  }
  return field.as<double>();
}

}  // namespace pgjobd
