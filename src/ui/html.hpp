#pragma once
// Text helpers for the server-rendered pages: every value a page shows passes through
// html_escape, since job types, queue names, errors and payloads come from whoever can
// insert a job.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ui/ui_store.hpp"

namespace pgjobd::ui {

// Escapes & < > " ' so that the result is safe both as element text and inside a quoted
// attribute value. Invalid UTF-8 and control characters other than \n, \t and \r become
// U+FFFD, so a hostile byte sequence cannot confuse the browser's parser either.
std::string html_escape(std::string_view text);

// 1234567 → "1,234,567"; negative numbers keep their sign.
std::string format_thousands(std::int64_t value);

// "10,000+" when the count stopped at its bound.
std::string format_count(const BoundedCount& count);

// 95 → "1m 35s", 7200 → "2h 0m": an age for people.
std::string format_age(double seconds);

// Percent-encoding of a query string value (RFC 3986 unreserved characters stay).
std::string url_encode(std::string_view text);

// Decodes %XX and '+' (form encoding); a malformed escape is kept as it is.
std::string url_decode(std::string_view text);

// JSON text as a page shows it, with bounds on what it can cost however the value is made.
struct PrettyJson {
  std::string text;
  bool cut = false;        // stopped at max_bytes
  bool flattened = false;  // levels deeper than max_indent were written compactly
};

// `json` (JSON text, possibly cut short) indented four spaces a level like PostgreSQL's
// jsonb_pretty, in one pass over the text without parsing it into a tree: at most
// `max_bytes` of output (plus one token), levels deeper than `max_indent` written compactly
// on one line. A payload 10,000 arrays deep costs 24 KB, not the 400 MB that indenting every
// level would print.
PrettyJson pretty_json(std::string_view json, std::size_t max_bytes, int max_indent);

// Parses "a=1&b=2&b=3" (a query string or a form body) into name → values, in order.
std::map<std::string, std::vector<std::string>> parse_form(std::string_view text);

}  // namespace pgjobd::ui
