#pragma once
// Making arbitrary bytes (a handler's stderr) safe for places that require UTF-8 text:
// PostgreSQL text columns and JSON log lines.

#include <string>
#include <string_view>

namespace pgjobd {

// Replaces each invalid UTF-8 byte (bad lead byte, truncated or overlong sequence,
// surrogate, code point above U+10FFFF) with U+FFFD; valid text is returned unchanged.
std::string valid_utf8(std::string_view text);

// At most `max_bytes` of `text`, cut at a character boundary (of valid UTF-8), followed by
// a note of the size dropped when anything was. The note may exceed `max_bytes` by up to
// 40 bytes.
std::string truncate_utf8(std::string_view text, std::size_t max_bytes);

}  // namespace pgjobd
