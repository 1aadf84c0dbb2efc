// percent_decode: the one %XX decoder, for the dashboard's forms (ui::url_decode) and the
// password candidates of a conninfo URL (log/secrets.cpp).

#include "text/percent.hpp"

#include <gtest/gtest.h>

#include <string>

namespace pgjobd {
namespace {

TEST(PercentDecode, DecodesEscapesOfEitherCase) {
  EXPECT_EQ(percent_decode("a%2Fb%2fc"), "a/b/c");
  EXPECT_EQ(percent_decode("%C3%A9%e2%82%ac"), "é€");
  EXPECT_EQ(percent_decode("%00"), std::string(1, '\0'));
  EXPECT_EQ(percent_decode("%25zz"), "%zz");  // decoded once only
}

TEST(PercentDecode, KeepsAMalformedEscapeAndPlusAsTheyAre) {
  EXPECT_EQ(percent_decode("100%"), "100%");
  EXPECT_EQ(percent_decode("%4"), "%4");
  EXPECT_EQ(percent_decode("%zz%4g%g4"), "%zz%4g%g4");
  EXPECT_EQ(percent_decode("a+b"), "a+b");  // form decoding (+ as space) is url_decode's
  EXPECT_EQ(percent_decode("%%41"), "%A");
}

}  // namespace
}  // namespace pgjobd
