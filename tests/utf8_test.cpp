// The one UTF-8 validator (read_utf8_character) and what is built on it: valid_utf8,
// utf8_cut and truncate_utf8 (bounded error texts that stay valid UTF-8).

#include <gtest/gtest.h>

#include "text/utf8.hpp"

#include <string>

namespace pgjobd {
namespace {

std::size_t length_at_0(const std::string& text) { return read_utf8_character(text, 0).length; }

TEST(ReadUtf8Character, DecodesEachLengthAtItsBounds) {
  const auto read = [](const std::string& text) { return read_utf8_character(text, 0); };
  EXPECT_EQ(read("A").length, 1u);
  EXPECT_EQ(read(std::string(1, '\0')).code, U'\0');
  EXPECT_EQ(read("\x7F").code, U'\x7F');
  EXPECT_EQ(read("\xC2\x80").code, U'\x80');  // the smallest two-byte character
  EXPECT_EQ(read("\xDF\xBF").code, U'\x7FF');
  EXPECT_EQ(read("\xE0\xA0\x80").code, U'\x800');
  EXPECT_EQ(read("\xED\x9F\xBF").code, U'\xD7FF');  // just below the surrogates
  EXPECT_EQ(read("\xEE\x80\x80").code, U'\xE000');  // just above them
  EXPECT_EQ(read("\xEF\xBF\xBF").length, 3u);
  EXPECT_EQ(read("\xF0\x90\x80\x80").code, U'\x10000');
  EXPECT_EQ(read("\xF4\x8F\xBF\xBF").code, U'\x10FFFF');
  EXPECT_EQ(read("\xF0\x9F\x90\x98").length, 4u);
}

TEST(ReadUtf8Character, RefusesWhatIsNotUtf8) {
  // A stray continuation byte; overlong forms; surrogates; above U+10FFFF; cut short (at
  // the end, or by an ASCII byte: "\x41" is 'A').
  for (const std::string text :
       {"\x80", "\xBF", "\xC0\xAF", "\xC1\xBF", "\xE0\x9F\xBF", "\xF0\x8F\xBF\xBF", "\xED\xA0\x80",
        "\xED\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xF8\x88\x80\x80\x80", "\xFF",
        "\xC3", "\xE2\x82", "\xF0\x9F\x90", "\xC3\x41", "\xE2\x82\x41"}) {
    EXPECT_EQ(length_at_0(text), 0u) << ::testing::PrintToString(text);
  }
}

TEST(ReadUtf8Character, ReadsAtAnOffset) {
  const std::string text = "a\xC3\xA9\xFF";
  EXPECT_EQ(read_utf8_character(text, 1).length, 2u);
  EXPECT_EQ(read_utf8_character(text, 1).code, U'\xE9');
  EXPECT_EQ(read_utf8_character(text, 2).length, 0u);  // a continuation byte
  EXPECT_EQ(read_utf8_character(text, 3).length, 0u);
}

TEST(IsUnicodeNoncharacter, TheThirtyTwoAndTheLastTwoOfEachPlane) {
  EXPECT_TRUE(is_unicode_noncharacter(U'\xFDD0'));
  EXPECT_TRUE(is_unicode_noncharacter(U'\xFDEF'));
  EXPECT_TRUE(is_unicode_noncharacter(U'\xFFFE'));
  EXPECT_TRUE(is_unicode_noncharacter(U'\xFFFF'));
  EXPECT_TRUE(is_unicode_noncharacter(U'\x1FFFE'));
  EXPECT_TRUE(is_unicode_noncharacter(U'\x10FFFF'));
  EXPECT_FALSE(is_unicode_noncharacter(U'\xFDCF'));
  EXPECT_FALSE(is_unicode_noncharacter(U'\xFDF0'));
  EXPECT_FALSE(is_unicode_noncharacter(U'\xFFFD'));
  EXPECT_FALSE(is_unicode_noncharacter(U'\x1FFFD'));
  EXPECT_FALSE(is_unicode_noncharacter(U'a'));
}

TEST(ValidUtf8, ReplacesEachInvalidByteAndKeepsTheRest) {
  EXPECT_EQ(valid_utf8("caf\xC3\xA9 \xF0\x9F\x90\x98"), "caf\xC3\xA9 \xF0\x9F\x90\x98");
  EXPECT_EQ(valid_utf8("a\xFF"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(valid_utf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // each byte of a cut one
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(valid_utf8("\xEF\xBF\xBE"), "\xEF\xBF\xBE");  // a noncharacter is valid UTF-8
  EXPECT_EQ(valid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Utf8Cut, BacksUpToACharacterBoundary) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC";  // a, é (2 bytes), € (3 bytes)
  EXPECT_EQ(utf8_cut(text, 0), 0u);
  EXPECT_EQ(utf8_cut(text, 1), 1u);
  EXPECT_EQ(utf8_cut(text, 2), 1u);
  EXPECT_EQ(utf8_cut(text, 3), 3u);
  EXPECT_EQ(utf8_cut(text, 5), 3u);
  EXPECT_EQ(utf8_cut(text, 6), 6u);
  EXPECT_EQ(utf8_cut(text, 100), 6u);
}

TEST(TruncateUtf8, ShortTextIsUnchanged) {
  EXPECT_EQ(truncate_utf8("hello", 5), "hello");
  EXPECT_EQ(truncate_utf8("", 0), "");
}

TEST(TruncateUtf8, LongTextIsCutAndSaysHowLongItWas) {
  EXPECT_EQ(truncate_utf8("abcdefgh", 3), "abc… (truncated: 8 bytes in all)");
}

TEST(TruncateUtf8, NeverCutsThroughACharacter) {
  // "é" is two bytes, "€" three: a cut at byte 2 or 3 would split them.
  const std::string text = "aé€b";
  EXPECT_EQ(truncate_utf8(text, 2), "a… (truncated: 7 bytes in all)");
  EXPECT_EQ(truncate_utf8(text, 3), "aé… (truncated: 7 bytes in all)");
  EXPECT_EQ(truncate_utf8(text, 4), "aé… (truncated: 7 bytes in all)");
  EXPECT_EQ(truncate_utf8(text, 6), "aé€… (truncated: 7 bytes in all)");
  const std::string cut = truncate_utf8(text, 4);
  EXPECT_EQ(valid_utf8(cut), cut);
}

}  // namespace
}  // namespace pgjobd
