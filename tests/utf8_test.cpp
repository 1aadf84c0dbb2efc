// truncate_utf8: bounded error texts that stay valid UTF-8.

#include <gtest/gtest.h>

#include "text/utf8.hpp"

namespace pgjobd {
namespace {

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
