// stored_result: what jobs.result keeps of a handler's value, at, below and above
// worker.max_result_bytes.

#include "text/result_json.hpp"

#include <gtest/gtest.h>

#include <string>

namespace pgjobd {
namespace {

std::string stored(std::string_view value, std::size_t max_bytes,
                   ResultFormat format = ResultFormat::kJson, std::size_t whole_bytes = 0) {
  return stored_result(value, format, whole_bytes, max_bytes);
}

TEST(StoredResult, JsonBelowAndAtTheBoundIsKeptAsIs) {
  EXPECT_EQ(stored(R"({"n": 1})", 100), R"({"n": 1})");
  EXPECT_EQ(stored(R"({"n": 1})", 8), R"({"n": 1})");  // exactly 8 bytes
  EXPECT_EQ(stored("[1, 2]\n", 100), "[1, 2]\n");      // jsonb drops the whitespace
}

TEST(StoredResult, AboveTheBoundIsTheTruncatedObjectWithTheOriginalSize) {
  EXPECT_EQ(stored(R"({"n": 1})", 7), R"({"truncated": true, "bytes": 8, "head": "{\"n\": 1"})");
  // A handler that kept only the bound + 1 bytes says how many there were.
  EXPECT_EQ(stored("abcd", 3, ResultFormat::kText, 10485760),
            R"({"truncated": true, "bytes": 10485760, "head": "abc"})");
}

TEST(StoredResult, TheHeadIsCutAtACharacterBoundary) {
  // "é" is two bytes: a cut after 2 bytes would split the second one.
  EXPECT_EQ(stored("aéé", 4, ResultFormat::kText),
            R"({"truncated": true, "bytes": 5, "head": "aé"})");
  EXPECT_EQ(stored("aéé", 2, ResultFormat::kText),
            R"({"truncated": true, "bytes": 5, "head": "a"})");
}

TEST(StoredResult, InvalidUtf8IsReplacedNotCarriedIntoTheHead) {
  // Continuation bytes without a lead: the cut stays near the bound and each becomes U+FFFD.
  EXPECT_EQ(stored("\x80\x80\x80\x80\x80\x80", 5, ResultFormat::kText),
            "{\"truncated\": true, \"bytes\": 6, \"head\": \"\xEF\xBF\xBD\xEF\xBF\xBD\"}");
  EXPECT_EQ(stored("ok\xFF", 100), "\"ok\xEF\xBF\xBD\"");
}

TEST(StoredResult, TextThatIsNotJsonIsAJsonString) {
  EXPECT_EQ(stored("hello\n", 100), R"("hello\n")");
  EXPECT_EQ(stored("{broken", 100), R"("{broken")");
  EXPECT_EQ(stored(std::string("a\0b", 3), 100), R"("ab")");  // jsonb refuses \u0000
}

TEST(StoredResult, TextFormatNeverParses) {
  EXPECT_EQ(stored("42", 100, ResultFormat::kText), R"("42")");
}

TEST(StoredResult, NothingOrNoBoundIsNull) {
  EXPECT_EQ(stored("", 100), "");
  EXPECT_EQ(stored(R"({"n": 1})", 0), "");
}

TEST(StorableJson, RefusesWhatJsonbCannotStore) {
  EXPECT_TRUE(storable_json(R"({"a": [1, 2.5e10, "x", null, true]})"));
  EXPECT_FALSE(storable_json(R"({"a": "\u0000"})"));
  EXPECT_FALSE(storable_json(R"({"\u0000": 1})"));
  EXPECT_FALSE(storable_json("1e100000"));
  EXPECT_TRUE(storable_json("1e-999"));
  EXPECT_FALSE(storable_json(std::string(1001, '[') + std::string(1001, ']')));
  EXPECT_TRUE(storable_json(std::string(1000, '[') + std::string(1000, ']')));
  EXPECT_FALSE(storable_json("1 2"));
  EXPECT_FALSE(storable_json(""));
}

}  // namespace
}  // namespace pgjobd
