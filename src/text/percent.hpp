#pragma once
// Percent-decoding (RFC 3986 %XX escapes), for URLs and form bodies.

#include <string>
#include <string_view>

namespace pgjobd {

// Decodes each %XX (hex digits of either case) to its byte. Tolerant: a '%' without two hex
// digits after it is kept as it is, as is every other byte ('+' too: form decoding is the
// caller's).
std::string percent_decode(std::string_view text);

}  // namespace pgjobd
