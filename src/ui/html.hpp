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

// Parses "a=1&b=2&b=3" (a query string or a form body) into name → values, in order.
std::map<std::string, std::vector<std::string>> parse_form(std::string_view text);

}  // namespace pgjobd::ui
