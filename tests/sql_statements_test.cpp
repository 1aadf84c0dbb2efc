// The statement counter behind the sql handler's config check: ';' ends a statement only
// outside quotes, identifiers, dollar quotes and comments.

#include "text/sql_statements.hpp"

#include <gtest/gtest.h>

namespace pgjobd {
namespace {

int statements(std::string_view sql) { return count_sql_statements(sql).statements; }

TEST(SqlStatements, OneStatementWithOrWithoutTrailingSemicolon) {
  EXPECT_EQ(statements("SELECT 1"), 1);
  EXPECT_EQ(statements("SELECT 1;"), 1);
  EXPECT_EQ(statements("SELECT 1 ;  \n -- done\n /* really */ ;\n"), 1);
  EXPECT_FALSE(count_sql_statements("SELECT 1; -- trailing").first_separator);
}

TEST(SqlStatements, NothingButCommentsAndSemicolons) {
  EXPECT_EQ(statements(""), 0);
  EXPECT_EQ(statements("  ; ;\n"), 0);
  EXPECT_EQ(statements("-- only a comment"), 0);
  EXPECT_EQ(statements("/* a /* nested */ comment */"), 0);
}

TEST(SqlStatements, TwoStatementsAndWhereTheFirstEnds) {
  const SqlStatementCount count = count_sql_statements("UPDATE t SET x = 1;\n  COMMIT");
  EXPECT_EQ(count.statements, 2);
  ASSERT_TRUE(count.first_separator);
  EXPECT_EQ(*count.first_separator, (SqlPosition{1, 19}));
  EXPECT_EQ(statements("UPDATE t SET x=1; COMMIT; UPDATE t SET y=1"), 3);
}

TEST(SqlStatements, PositionCountsLinesAndCharacters) {
  const auto count = count_sql_statements("-- é\nSELECT 'ü';SELECT 2");
  ASSERT_TRUE(count.first_separator);
  EXPECT_EQ(*count.first_separator, (SqlPosition{2, 11}));
}

TEST(SqlStatements, SemicolonsInStringsDoNotCount) {
  EXPECT_EQ(statements("SELECT ';'"), 1);
  EXPECT_EQ(statements("SELECT 'it''s; fine'"), 1);
  EXPECT_EQ(statements("SELECT '\\'; SELECT 2"), 2);  // standard strings: \ is a character
  EXPECT_EQ(statements("SELECT E'\\'; still inside'"), 1);
  EXPECT_EQ(statements("SELECT e'a\\\\'; SELECT 2"), 2);  // \\ is one backslash, then the end
  EXPECT_EQ(statements("SELECT E'it''s; fine'"), 1);
  EXPECT_EQ(statements("SELECT U&'d\\0061t;a'"), 1);
  EXPECT_EQ(statements("SELECT X'1F'; SELECT 2"), 2);
}

TEST(SqlStatements, SemicolonsInQuotedIdentifiersDoNotCount) {
  EXPECT_EQ(statements("SELECT 1 AS \"a;b\""), 1);
  EXPECT_EQ(statements("SELECT 1 AS \"a\"\";b\""), 1);
}

TEST(SqlStatements, DollarQuotes) {
  EXPECT_EQ(statements("DO $$ BEGIN PERFORM 1; PERFORM 2; END $$"), 1);
  EXPECT_EQ(statements("DO $body$ BEGIN RAISE NOTICE '$$;'; END $body$;"), 1);
  EXPECT_EQ(statements("SELECT $a$ x $b$; $b$ $a$"), 1);
  EXPECT_EQ(statements("SELECT $q$ unterminated; still inside"), 1);
}

TEST(SqlStatements, ParametersAndIdentifiersWithDollarsAreNotQuotes) {
  EXPECT_EQ(statements("SELECT $1, $2; SELECT $1"), 2);
  EXPECT_EQ(statements("SELECT a$b$ FROM t; SELECT 2"), 2);
  EXPECT_EQ(statements("SELECT $1::jsonb->>'k' FROM t$x; SELECT 2"), 2);
}

TEST(SqlStatements, Comments) {
  EXPECT_EQ(statements("SELECT 1 -- ; not a separator\n"), 1);
  EXPECT_EQ(statements("SELECT 1 /* ; /* nested ; */ still ; */"), 1);
  EXPECT_EQ(statements("SELECT 1 /* a */; SELECT 2"), 2);
  EXPECT_EQ(statements("SELECT 1 - -2; SELECT 2"), 2);  // two minus signs, no comment
  EXPECT_EQ(statements("SELECT 4/2; SELECT 2"), 2);
  EXPECT_EQ(statements("SELECT 1 /* unterminated ; "), 1);
}

TEST(SqlStatements, UnterminatedStringRunsToTheEnd) {
  EXPECT_EQ(statements("SELECT 'open; SELECT 2"), 1);
  EXPECT_EQ(statements("SELECT \"open; SELECT 2"), 1);
}

}  // namespace
}  // namespace pgjobd
