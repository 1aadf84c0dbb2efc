#pragma once
// The one error type the database layer throws. Everything outside src/db/ catches this,
// never a libpqxx exception, so no caller needs pqxx headers.

#include <stdexcept>
#include <string>
#include <utility>

namespace pgjobd {

class DbError : public std::runtime_error {
 public:
  DbError(const std::string& what, std::string sqlstate, bool connection_lost,
          bool timed_out = false)
      : std::runtime_error(what),
        sqlstate_(std::move(sqlstate)),
        connection_lost_(connection_lost || timed_out),
        timed_out_(timed_out) {}
  // The SQLSTATE of a statement the server rejected ("" when it never got that far).
  const std::string& sqlstate() const { return sqlstate_; }
  // The server could not be reached or the session broke: retrying later may succeed.
  bool connection_lost() const { return connection_lost_; }
  // No answer came within the call's deadline (database.call_timeout): the session was
  // closed. Also connection_lost(): the call may or may not have taken effect.
  bool timed_out() const { return timed_out_; }

 private:
  std::string sqlstate_;
  bool connection_lost_;
  bool timed_out_;
};

}  // namespace pgjobd
