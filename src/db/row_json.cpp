// A statement's rows as JSON text, bounded while it is written.

#include "db/row_json.hpp"

#include <libpq-fe.h>

#include <string>
#include <string_view>
#include <vector>

#include "db/connection.hpp"
#include "text/result_json.hpp"

namespace pgjobd {
namespace {

// A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. PostgreSQL prints its
// numbers so, but for NaN and ±Infinity.
bool is_json_number(std::string_view text) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i > start;
  };
  if (i < text.size() && text[i] == '-') ++i;
  if (i < text.size() && text[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < text.size() && text[i] == '.' && (++i, !digits())) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == text.size();
}

// Appends one field's value as JSON.
void append_value(std::string& out, Oid type, std::string_view text) {
  switch (type) {
    case kBoolOid:
      out += text == "t" ? "true" : "false";
      return;
    case kInt2Oid:
    case kInt4Oid:
    case kInt8Oid:
    case kOidOid:
    case kFloat4Oid:
    case kFloat8Oid:
    case kNumericOid:
      if (is_json_number(text)) {
        out += text;
        return;
      }
      break;
    case kJsonOid:
    case kJsonbOid:
      if (storable_json(text)) {
        out += text;
        return;
      }
      break;
    default:
      break;
  }
  out += json_string(text);
}

}  // namespace

HeadBuffer rows_json(const pg_result& result, std::size_t keep_bytes) {
  auto* rows = const_cast<PGresult*>(&result);  // libpq's getters take no const
  HeadBuffer json(keep_bytes);
  const int row_count = PQntuples(rows);
  const int column_count = PQnfields(rows);
  if (row_count == 0 || column_count == 0) return json;
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(column_count));
  for (int c = 0; c < column_count; ++c) names.push_back(json_string(PQfname(rows, c)) + ":");
  // One row at a time, kept while there is room: the text of all rows is never held.
  std::string row = "[";
  for (int r = 0; r < row_count; ++r) {
    row += '{';
    for (int c = 0; c < column_count; ++c) {
      if (c > 0) row += ',';
      row += names[static_cast<std::size_t>(c)];
      if (PQgetisnull(rows, r, c)) {
        row += "null";
      } else {
        append_value(row, PQftype(rows, c),
                     {PQgetvalue(rows, r, c), static_cast<std::size_t>(PQgetlength(rows, r, c))});
      }
    }
    row += r + 1 == row_count ? "}]" : "},";
    json.append(row);
    row.clear();
  }
  return json;
}

}  // namespace pgjobd
