#pragma once
// The rows a statement returned as JSON text: the sql handler's result (README "sql").

#include <cstddef>

#include "text/head_buffer.hpp"

struct pg_result;

namespace pgjobd {

// NULL (empty) when the statement returned no rows or is a command; otherwise an array of
// one object per row, column name → value: SQL NULL → null, boolean → true/false, a
// finite integer, float or numeric → a number, json and jsonb → their JSON (a string of
// the text when jsonb cannot store it: text/result_json.hpp), any other type → a string
// of PostgreSQL's text form ('2026-01-02 03:04:05+00', '{1,2}'). Keeps only the first
// keep_bytes of the text, counting the rest (nothing at all for no rows).
HeadBuffer rows_json(const pg_result& result, std::size_t keep_bytes);

}  // namespace pgjobd
