// parse_float8 and parse_bigint_array: the texts PostgreSQL prints, read without an iostream.

#include "db/field_values.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

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

TEST(ParseBigintArray, ReadsWhatPostgresqlPrints) {
  using Ids = std::vector<std::int64_t>;
  EXPECT_EQ(parse_bigint_array("{}"), Ids{});
  EXPECT_EQ(parse_bigint_array("{7}"), Ids{7});
  EXPECT_EQ(parse_bigint_array("{1,22,-3,9223372036854775807}"),
            (Ids{1, 22, -3, 9223372036854775807}));
}

TEST(ParseBigintArray, RejectsAnythingButOneFlatArrayOfIntegers) {
  EXPECT_EQ(parse_bigint_array(""), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("1,2"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{1,}"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{,1}"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{1,,2}"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{NULL}"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{{1}}"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{1, 2}"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{1.5}"), std::nullopt);
  EXPECT_EQ(parse_bigint_array("{9223372036854775808}"), std::nullopt);
}

}  // namespace
}  // namespace pgjobd
