// Escaping text from outside: one terminal line (escape_control_characters) and JSON string
// literals (append_json_string, for the JSON log lines), each
// checked against a JSON parser rather than against itself.
#include "text/escape.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace pgjobd {
namespace {

TEST(Escape, ControlCharactersBecomeVisibleEscapes) {
  EXPECT_EQ(escape_control_characters(std::string("a\nb\r\tc\x1b[31m\x7f\0d", 14)),
            "a\\nb\\r\\tc\\x1b[31m\\x7f\\x00d");
  EXPECT_EQ(escape_control_characters("caf\xc3\xa9 \"q\""), "caf\xc3\xa9 \"q\"");
}

TEST(Escape, JsonStringLiteralsParseBackToTheSameText) {
  std::string every_byte;
  for (int c = 1; c < 0x80; ++c) every_byte += static_cast<char>(c);
  for (const std::string& text :
       {std::string(), std::string("plain"), std::string("quote \" backslash \\ slash /"),
        std::string("nul\0inside", 10), every_byte, std::string("caf\xc3\xa9 \xe2\x9c\x93")}) {
    std::string out = "[";
    append_json_string(out, text);
    out += "]";
    const auto parsed = nlohmann::json::parse(out);
    EXPECT_EQ(parsed[0].get<std::string>(), text) << out;
  }
  std::string out;
  append_json_string(out, "\x01\n");
  EXPECT_EQ(out, "\"\\u0001\\n\"");
}

}  // namespace
}  // namespace pgjobd
