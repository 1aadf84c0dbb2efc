#pragma once
// Making arbitrary bytes (a handler's stderr) safe for places that require UTF-8 text:
// PostgreSQL text columns and JSON log lines.

#include <string>
#include <string_view>

namespace pgjobd {

// Replaces each invalid UTF-8 byte (bad lead byte, truncated or overlong sequence,
// surrogate, code point above U+10FFFF) with U+FFFD; valid text is returned unchanged.
std::string valid_utf8(std::string_view text);

}  // namespace pgjobd
