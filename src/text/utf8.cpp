// UTF-8 validation with replacement, and cutting at character boundaries.

#include "text/utf8.hpp"

#include <cstdint>

namespace pgjobd {

Utf8Character read_utf8_character(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t length;
  char32_t code;
  if (lead < 0x80) return {1, lead};
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    code = lead & 0x07;
  } else {
    return {};
  }
  if (i + length > text.size()) return {};
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {};
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  // Overlong forms and surrogates too: readers (browsers, PostgreSQL) would otherwise take
  // them differently from us.
  static constexpr std::uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kMinimum[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {};
  return {length, code};
}

bool is_unicode_noncharacter(char32_t code) {
  return (code >= 0xFDD0 && code <= 0xFDEF) || (code & 0xFFFE) == 0xFFFE;
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = read_utf8_character(text, i).length;
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  return out;
}

std::size_t utf8_cut(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  std::size_t cut = max_bytes;
  // Back up over continuation bytes (10xxxxxx) to the start of the character cut through:
  // at most 3, so that bytes which are not UTF-8 (a run of continuation bytes) are cut near
  // max_bytes too, not at 0.
  const std::size_t lowest = max_bytes > 3 ? max_bytes - 3 : 0;
  while (cut > lowest && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

std::string truncate_utf8(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return std::string(text.substr(0, utf8_cut(text, max_bytes))) +
         "… (truncated: " + std::to_string(text.size()) + " bytes in all)";
}

}  // namespace pgjobd
