#pragma once
// Turning config values into SQL text safely: identifiers are quoted, values are encoded
// as PostgreSQL array literals and always sent as $n parameters, never pasted in.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pgjobd {

// "my schema" → "\"my schema\"" with embedded quotes doubled.
std::string quote_identifier(std::string_view name);

// {"a","b \"c\""} — a text[] literal, for a $n parameter.
std::string text_array_literal(const std::vector<std::string>& values);

// {"a",NULL} — as text_array_literal, an empty value written NULL: for an array of optional
// values (jsonb[] results).
std::string nullable_array_literal(const std::vector<std::string>& values);

// {1,2,3} — an int/bigint[] literal, for a $n parameter.
std::string int_array_literal(const std::vector<std::int64_t>& values);

// Makes text safe to store in a text column: drops NUL bytes (PostgreSQL rejects them)
// and replaces invalid UTF-8 sequences with U+FFFD.
std::string sanitize_text(std::string_view text);

// Replaces every `placeholder` in a statement's text ("{jobs}") with `value`.
void replace_all(std::string& text, std::string_view placeholder, std::string_view value);

}  // namespace pgjobd
