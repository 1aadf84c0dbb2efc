#pragma once
// Counting the statements in SQL text without a server: a lexer that knows where ';' ends a
// statement and where it is only quoted or commented text. For config checks (an sql
// handler runs exactly one statement), not for parsing SQL.

#include <cstddef>
#include <optional>
#include <string_view>

namespace pgjobd {

// A place in SQL text: 1-based line and column (columns count characters, not bytes).
struct SqlPosition {
  std::size_t line = 1;
  std::size_t column = 1;
  bool operator==(const SqlPosition&) const = default;
};

struct SqlStatementCount {
  // Statements with any content; empty ones (";;", a trailing ';' with comments after it)
  // are not counted: the server ignores them too.
  int statements = 0;
  // The ';' ending the first statement when another one follows it.
  std::optional<SqlPosition> first_separator;
};

// Understands PostgreSQL's lexical structure as far as ';' is concerned: '...' with ''
// doubled, E'...' with backslash escapes, "..." identifiers, dollar quotes ($$...$$ and
// $tag$...$tag$, not $1 parameters or identifiers such as a$b), -- line comments and
// nested /* */ comments. Unterminated quotes or comments run to the end of the text (the
// server reports them).
SqlStatementCount count_sql_statements(std::string_view sql);

}  // namespace pgjobd
