#pragma once
// Keeping text that came from a file or a peer on one terminal line.

#include <string>
#include <string_view>

namespace pgjobd {

// Writes \n, \r and \t as those escapes and other C0 bytes and DEL as \xNN, so that the
// text is one line without control characters (no NUL to cut it short, no terminal escape
// sequence). Every other byte, UTF-8 included, is kept as is.
std::string escape_control_characters(std::string_view text);

// Appends `text` as a JSON string literal: quotes and backslashes escaped, \n \r \t as
// those escapes, other C0 bytes as \u00NN; every other byte as is (the caller makes sure
// the text is UTF-8 where that matters).
void append_json_string(std::string& out, std::string_view text);

// 'text', for naming a value in an error message.
std::string single_quoted(std::string_view text);

}  // namespace pgjobd
