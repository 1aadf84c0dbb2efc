#pragma once
// UTF-8 validation, in one place: making arbitrary bytes (a handler's stderr, a hostile job
// type) safe where UTF-8 text is required: PostgreSQL text columns, JSON log lines, HTML
// pages and systemd's STATUS= line.

#include <cstddef>
#include <string>
#include <string_view>

namespace pgjobd {

// The UTF-8 character that starts at text[i]: its length in bytes and its code point.
// length is 0 when the bytes there are not a valid character: a bad lead byte, a truncated
// or overlong sequence, a surrogate or a code point above U+10FFFF.
struct Utf8Character {
  std::size_t length = 0;
  char32_t code = 0;
};
Utf8Character read_utf8_character(std::string_view text, std::size_t i);

// U+FDD0..U+FDEF and the last two code points of every plane: valid UTF-8, but refused by
// some readers (systemd drops a STATUS= line holding one).
bool is_unicode_noncharacter(char32_t code);

// Replaces each invalid UTF-8 byte (see read_utf8_character) with U+FFFD; valid text is
// returned unchanged.
std::string valid_utf8(std::string_view text);

// The largest cut ≤ max_bytes that does not split a character of (valid UTF-8) `text`:
// a cut at max_bytes backed up over continuation bytes (at most 3: of invalid UTF-8, a cut
// near max_bytes).
std::size_t utf8_cut(std::string_view text, std::size_t max_bytes);

// At most `max_bytes` of `text`, cut at a character boundary (of valid UTF-8), followed by
// a note of the size dropped when anything was. The note may exceed `max_bytes` by up to
// 40 bytes.
std::string truncate_utf8(std::string_view text, std::size_t max_bytes);

}  // namespace pgjobd
