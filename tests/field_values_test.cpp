// parse_float8: the float8 texts PostgreSQL prints, read without an iostream.

#include "db/field_values.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pgjobd {
namespace {

TEST(ParseFloat8, ReadsWhatPostgresqlPrints) {
  EXPECT_EQ(parse_float8("0.25"), 0.25);
  EXPECT_EQ(parse_float8("-3"), -3.0);
  EXPECT_EQ(parse_float8("1.5e-05"), 1.5e-05);
  EXPECT_EQ(parse_float8("1e+300"), 1e300);
  // 17 significant digits (extra_float_digits 1): read exactly, as strtod would.
  EXPECT_EQ(parse_float8("1764760000.1234567"), 1764760000.1234567);
  EXPECT_EQ(parse_float8("Infinity"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(parse_float8("-Infinity"), -std::numeric_limits<double>::infinity());
  const auto nan = parse_float8("NaN");
  ASSERT_TRUE(nan.has_value());
  EXPECT_TRUE(std::isnan(*nan));
}

TEST(ParseFloat8, RejectsAnythingButOneWholeNumber) {
  EXPECT_EQ(parse_float8(""), std::nullopt);
  EXPECT_EQ(parse_float8("12abc"), std::nullopt);
  EXPECT_EQ(parse_float8(" 1"), std::nullopt);
  EXPECT_EQ(parse_float8("1 "), std::nullopt);
  EXPECT_EQ(parse_float8("abc"), std::nullopt);
  // Out of a double's range: left to libpqxx's conversion and its error.
  EXPECT_EQ(parse_float8("1e400"), std::nullopt);
}

}  // namespace
}  // namespace pgjobd
