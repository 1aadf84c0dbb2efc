// Unit tests for parse_duration / format_duration: every unit, zero, and each rejection.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "pgjobd/duration.hpp"

namespace pgjobd {
namespace {

// The message parse_duration throws for `text`, or a test failure if it accepts it.
std::string rejection(const std::string& text) {
  try {
    Millis parsed = parse_duration(text);
    ADD_FAILURE() << "'" << text << "' was accepted as " << parsed.count() << "ms";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

TEST(ParseDurationTest, ReadsEveryUnit) {
  EXPECT_EQ(parse_duration("250ms"), Millis(250));
  EXPECT_EQ(parse_duration("5s"), Millis(5'000));
  EXPECT_EQ(parse_duration("10m"), Millis(600'000));
  EXPECT_EQ(parse_duration("1h"), Millis(3'600'000));
  EXPECT_EQ(parse_duration("7d"), Millis(604'800'000));
}

TEST(ParseDurationTest, ReadsZeroWithOrWithoutUnit) {
  EXPECT_EQ(parse_duration("0"), Millis(0));
  EXPECT_EQ(parse_duration("0s"), Millis(0));
  EXPECT_EQ(parse_duration("0ms"), Millis(0));
}

TEST(ParseDurationTest, ReadsLargeValuesUpToTheLimit) {
  EXPECT_EQ(parse_duration("36500d"), Millis(36'500LL * 86'400'000));
  EXPECT_EQ(parse_duration("90000s"), Millis(90'000'000));
}

TEST(ParseDurationTest, UnknownUnitMessageNamesTheTextAndTheUnits) {
  EXPECT_EQ(rejection("5x"), "bad duration '5x' (use 250ms, 5s, 10m, 1h or 7d)");
  EXPECT_EQ(rejection("5S"), "bad duration '5S' (use 250ms, 5s, 10m, 1h or 7d)");
  EXPECT_EQ(rejection("5sec"), "bad duration '5sec' (use 250ms, 5s, 10m, 1h or 7d)");
  EXPECT_EQ(rejection("ms"), "bad duration 'ms' (use 250ms, 5s, 10m, 1h or 7d)");
}

TEST(ParseDurationTest, RejectsEmpty) {
  EXPECT_EQ(rejection(""), "bad duration '' (empty; use 250ms, 5s, 10m, 1h or 7d)");
}

TEST(ParseDurationTest, RejectsNegative) {
  EXPECT_EQ(rejection("-5s"), "bad duration '-5s' (must not be negative)");
}

TEST(ParseDurationTest, RejectsMissingUnitOnNonZero) {
  EXPECT_EQ(rejection("30"), "bad duration '30' (missing unit; use 250ms, 5s, 10m, 1h or 7d)");
}

TEST(ParseDurationTest, RejectsSpaces) {
  // A tab is quoted escaped, as every control character is.
  for (auto [text, quoted] : {std::pair{" 5s", " 5s"}, std::pair{"5 s", "5 s"},
                              std::pair{"5s ", "5s "}, std::pair{"5\ts", "5\\ts"}}) {
    std::string message = rejection(text);
    EXPECT_NE(message.find("no spaces"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("'") + quoted + "'"), std::string::npos) << message;
  }
}

TEST(ParseDurationTest, RejectsFractionsSuggestingAWholeSmallerUnit) {
  EXPECT_EQ(rejection("1.5s"), "bad duration '1.5s' (no fractions: write 1500ms)");
  EXPECT_EQ(rejection("1.5h"), "bad duration '1.5h' (no fractions: write 90m)");
  EXPECT_EQ(rejection("0.25s"), "bad duration '0.25s' (no fractions: write 250ms)");
  // No exact equivalent in whole milliseconds: a general hint instead.
  EXPECT_NE(rejection("1.5ms").find("e.g. 1500ms for 1.5s"), std::string::npos);
  EXPECT_NE(rejection("1.s").find("no fractions"), std::string::npos);
}

TEST(ParseDurationTest, RejectsOverflowAndAbsurdLengths) {
  EXPECT_EQ(rejection("99999999999999999999ms"),
            "bad duration '99999999999999999999ms' (too long; at most 36500d)");
  EXPECT_EQ(rejection("36501d"), "bad duration '36501d' (too long; at most 36500d)");
  EXPECT_EQ(rejection("9223372036854775807d"),
            "bad duration '9223372036854775807d' (too long; at most 36500d)");
}

// Found by tests/fuzz/duration_fuzz (corpus/duration/hint_too_long): the exact equivalent
// of a fraction at the limit was itself too long, so the hint earned a new error.
TEST(ParseDurationTest, SuggestsNoFractionEquivalentBeyondTheLimit) {
  EXPECT_EQ(rejection("36500.1d").find("write"), std::string::npos) << rejection("36500.1d");
  EXPECT_EQ(rejection("36499.5d"), "bad duration '36499.5d' (no fractions: write 875988h)");
}

// Found by tests/fuzz/duration_fuzz (corpus/duration/nul): the quoted text was written raw,
// so a NUL cut what() short at the quote and a newline split the config diagnostic.
TEST(ParseDurationTest, QuotesControlCharactersEscaped) {
  EXPECT_EQ(rejection(std::string("5\0s", 3)),
            "bad duration '5\\x00s' (use 250ms, 5s, 10m, 1h or 7d)");
  EXPECT_EQ(rejection("5\ns"), "bad duration '5\\ns' (no spaces; use 250ms, 5s, 10m, 1h or 7d)");
}

TEST(ParseDurationTest, RejectsSignsAndOtherNoise) {
  for (const char* text : {"+5s", "5s5s", "s5", "0x10s", "5_000ms", "abc"}) {
    EXPECT_NE(rejection(text).find(std::string("'") + text + "'"), std::string::npos) << text;
  }
}

TEST(FormatDurationTest, UsesTheLargestExactUnit) {
  EXPECT_EQ(format_duration(Millis(0)), "0");
  EXPECT_EQ(format_duration(Millis(250)), "250ms");
  EXPECT_EQ(format_duration(Millis(1'500)), "1500ms");
  EXPECT_EQ(format_duration(Millis(5'000)), "5s");
  EXPECT_EQ(format_duration(Millis(90'000)), "90s");
  EXPECT_EQ(format_duration(Millis(600'000)), "10m");
  EXPECT_EQ(format_duration(Millis(3'600'000)), "1h");
  EXPECT_EQ(format_duration(Millis(604'800'000)), "7d");
  EXPECT_EQ(format_duration(Millis(-5'000)), "-5s");
}

TEST(FormatDurationTest, RoundTripsThroughParse) {
  for (long long ms : {1LL, 999LL, 1'000LL, 61'000LL, 7'200'000LL, 86'400'000LL, 90'061'001LL}) {
    EXPECT_EQ(parse_duration(format_duration(Millis(ms))), Millis(ms)) << ms;
  }
}

}  // namespace
}  // namespace pgjobd
