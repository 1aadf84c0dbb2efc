// Identifier quoting, array literals and text sanitising.

#include "db/sql_text.hpp"

#include <gtest/gtest.h>

namespace pgjobd {
namespace {

TEST(SqlText, QuotesIdentifiersAndDoublesQuotes) {
  EXPECT_EQ(quote_identifier("public"), "\"public\"");
  EXPECT_EQ(quote_identifier("a\"b"), "\"a\"\"b\"");
}

TEST(SqlText, EncodesTextArrays) {
  EXPECT_EQ(text_array_literal({}), "{}");
  EXPECT_EQ(text_array_literal({"a", "b c"}), "{\"a\",\"b c\"}");
  EXPECT_EQ(text_array_literal({"q\"t", "back\\slash", "x;y'z,{}"}),
            "{\"q\\\"t\",\"back\\\\slash\",\"x;y'z,{}\"}");
}

TEST(SqlText, EncodesIntArrays) {
  EXPECT_EQ(int_array_literal({}), "{}");
  EXPECT_EQ(int_array_literal({1, -2, 9000000000}), "{1,-2,9000000000}");
}

TEST(SqlText, SanitizeKeepsValidUtf8) {
  EXPECT_EQ(sanitize_text("plain"), "plain");
  EXPECT_EQ(sanitize_text("h\xC3\xA9llo \xF0\x9F\x98\x80"), "h\xC3\xA9llo \xF0\x9F\x98\x80");
}

TEST(SqlText, SanitizeReplacesInvalidBytesAndDropsNul) {
  EXPECT_EQ(sanitize_text(std::string("a\0b", 3)), "ab");
  EXPECT_EQ(sanitize_text("x\xFFy"), "x\xEF\xBF\xBDy");
  EXPECT_EQ(sanitize_text("\xC3"), "\xEF\xBF\xBD");                  // truncated sequence
  EXPECT_EQ(sanitize_text("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_EQ(sanitize_text("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
}

}  // namespace
}  // namespace pgjobd
