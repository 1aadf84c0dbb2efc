#pragma once
// Numbers read out of result fields without libpqxx 6.4's own conversion, which parses a
// double through an iostream (std::num_get, then strtod's exact path for the 17 digits
// PostgreSQL prints): on the rows of a noop backlog's claims that was 3% of the daemon's
// CPU.

#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <string_view>
#include <vector>

namespace pgjobd {

// A float8 as PostgreSQL prints it ("0.25", "1.5e-05", "Infinity", "-Infinity", "NaN"), or
// nothing when `text` is not wholly one number.
std::optional<double> parse_float8(std::string_view text);

// The field as a double: parse_float8, or else libpqxx's own conversion (a null or a
// non-number then throws as `as<double>()` does).
double field_as_double(const pqxx::field& field);

// A bigint[] as PostgreSQL prints it ("{}", "{1,22,-3}"), or nothing when `text` is not
// wholly one (a NULL element, a nested array, spaces, another type).
std::optional<std::vector<std::int64_t>> parse_bigint_array(std::string_view text);

}  // namespace pgjobd
