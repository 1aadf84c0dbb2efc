// The statement counter's lexer (see sql_statements.hpp).

#include "text/sql_statements.hpp"

namespace pgjobd {
namespace {

bool is_ident_start(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || byte >= 0x80;
}

bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9') || c == '$'; }

class Lexer {
 public:
  explicit Lexer(std::string_view sql) : sql_(sql) {}

  SqlStatementCount run() {
    SqlStatementCount count;
    bool content = false;                  // the current statement has a token
    std::optional<SqlPosition> first_end;  // the ';' ending the first statement
    while (i_ < sql_.size()) {
      const char c = sql_[i_];
      if (c == ';') {
        if (content) {
          ++count.statements;
          if (count.statements == 1) first_end = position();
          content = false;
        }
        advance(1);
      } else if (c == '-' && peek(1) == '-') {
        while (i_ < sql_.size() && sql_[i_] != '\n') advance(1);
      } else if (c == '/' && peek(1) == '*') {
        skip_block_comment();
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        advance(1);
      } else {
        if (!content && count.statements >= 1) count.first_separator = first_end;
        content = true;
        skip_token();
      }
    }
    if (content) ++count.statements;
    return count;
  }

 private:
  char peek(std::size_t ahead) const { return i_ + ahead < sql_.size() ? sql_[i_ + ahead] : '\0'; }

  SqlPosition position() const { return {line_, column_}; }

  void advance(std::size_t n) {
    for (; n > 0 && i_ < sql_.size(); --n, ++i_) {
      const auto byte = static_cast<unsigned char>(sql_[i_]);
      if (sql_[i_] == '\n') {
        ++line_;
        column_ = 1;
      } else if ((byte & 0xC0) != 0x80) {  // a UTF-8 continuation byte is no new character
        ++column_;
      }
    }
  }

  void skip_block_comment() {  // at "/*"; PostgreSQL's block comments nest
    int depth = 0;
    while (i_ < sql_.size()) {
      if (sql_[i_] == '/' && peek(1) == '*') {
        ++depth;
        advance(2);
      } else if (sql_[i_] == '*' && peek(1) == '/') {
        advance(2);
        if (--depth == 0) return;
      } else {
        advance(1);
      }
    }
  }

  // At the opening quote; `backslashes`: E'' strings, where \ escapes the next character.
  void skip_quoted(char quote, bool backslashes) {
    advance(1);
    while (i_ < sql_.size()) {
      const char c = sql_[i_];
      if (backslashes && c == '\\') {
        advance(2);
      } else if (c == quote) {
        if (peek(1) == quote) {
          advance(2);  // doubled: a quote inside
        } else {
          advance(1);
          return;
        }
      } else {
        advance(1);
      }
    }
  }

  // At '$': the length of a dollar-quote delimiter ($$ or $tag$) starting here, or 0.
  std::size_t dollar_tag_length() const {
    std::size_t j = i_ + 1;
    if (j < sql_.size() && sql_[j] != '$' && !is_ident_start(sql_[j])) return 0;  // $1, $
    while (j < sql_.size() && sql_[j] != '$') {
      if (!is_ident_char(sql_[j])) return 0;
      ++j;
    }
    return j < sql_.size() ? j - i_ + 1 : 0;
  }

  void skip_token() {
    const char c = sql_[i_];
    if (c == '\'') {
      skip_quoted('\'', false);
    } else if (c == '"') {
      skip_quoted('"', false);
    } else if (c == '$') {
      const std::size_t length = dollar_tag_length();
      if (length == 0) {
        advance(1);
        return;
      }
      const std::string_view tag = sql_.substr(i_, length);
      advance(length);
      const std::size_t end = sql_.find(tag, i_);
      advance(end == std::string_view::npos ? sql_.size() - i_ : end - i_ + length);
    } else if (is_ident_start(c)) {
      // An identifier or keyword, which may run into $ (a$b) but never starts a quote,
      // except E'...' (escape string), and U&'...' / B'...' / X'...' / N'...' (plain).
      const std::size_t start = i_;
      while (i_ < sql_.size() && is_ident_char(sql_[i_])) advance(1);
      if (i_ < sql_.size() && sql_[i_] == '\'') {
        const std::string_view word = sql_.substr(start, i_ - start);
        skip_quoted('\'', word == "E" || word == "e");
      }
    } else {
      advance(1);  // an operator, a digit, punctuation: nothing that hides a ';'
    }
  }

  std::string_view sql_;
  std::size_t i_ = 0;
  std::size_t line_ = 1;
  std::size_t column_ = 1;
};

}  // namespace

SqlStatementCount count_sql_statements(std::string_view sql) { return Lexer(sql).run(); }

}  // namespace pgjobd
