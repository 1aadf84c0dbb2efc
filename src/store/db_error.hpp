#pragma once
// The one error type the database layer throws. Everything outside src/db/ catches this,
// never a libpqxx exception, so no caller needs pqxx headers.

#include <stdexcept>
#include <string>
#include <utility>

namespace pgjobd {

class DbError : public std::runtime_error {
 public:
  DbError(const std::string& what, std::string sqlstate, bool connection_lost)
      : std::runtime_error(what),
        sqlstate_(std::move(sqlstate)),
        connection_lost_(connection_lost) {}
  // The SQLSTATE of a statement the server rejected ("" when it never got that far).
  const std::string& sqlstate() const { return sqlstate_; }
  // The server could not be reached or the session broke: retrying later may succeed.
  bool connection_lost() const { return connection_lost_; }

 private:
  std::string sqlstate_;
  bool connection_lost_;
};

}  // namespace pgjobd
