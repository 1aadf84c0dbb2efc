#pragma once
// What goes into jobs.result, in one place: a handler's value as JSON text PostgreSQL's
// jsonb accepts, bounded by worker.max_result_bytes (README "Results").

#include <cstddef>
#include <string>
#include <string_view>

#include "pgjobd/job.hpp"

namespace pgjobd {

// Whether `text` is one JSON value that jsonb stores without error: no \u0000 in a string
// or key, nesting at most 1,000 deep (deeper exhausts the server's stack), each number of
// at most 1,000 characters with an exponent within ±1,000 (numeric overflows further).
bool storable_json(std::string_view text);

// `text` as a JSON string: invalid UTF-8 replaced with U+FFFD, NUL bytes dropped (jsonb
// refuses \u0000).
std::string json_string(std::string_view text);

// The jsonb text to store for `value` (read as `format` says), or "" for NULL:
// - max_bytes 0 (keep no results), or nothing returned (an empty value, whole_bytes 0): "";
// - above max_bytes (the value's size is whole_bytes when the handler kept only its first
//   bytes, else value.size()): {"truncated": true, "bytes": <size>, "head": "<the first
//   max_bytes bytes, cut at a UTF-8 boundary, as text>"};
// - kJson and storable_json(value): value itself;
// - otherwise json_string(value).
std::string stored_result(std::string_view value, ResultFormat format, std::size_t whole_bytes,
                          std::size_t max_bytes);

}  // namespace pgjobd
