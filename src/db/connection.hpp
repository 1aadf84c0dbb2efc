#pragma once
// Opening PostgreSQL connections. Only files that talk to the database include pqxx.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "pgjobd/config.hpp"

namespace pqxx {
class connection_base;
}

namespace pgjobd {

// pqxx::connection is a typedef in libpqxx 6 and cannot be forward-declared; we hold the
// base class and delete through the concrete type in connection.cpp.
struct ConnectionDeleter {
  void operator()(pqxx::connection_base* conn) const;
};
using ConnectionPtr = std::unique_ptr<pqxx::connection_base, ConnectionDeleter>;

// Opens one connection, tagged application_name = "pgjobd <role>" so operators can tell
// pgjobd's sessions apart in pg_stat_activity. Throws pqxx::broken_connection on failure
// (its message never contains the password).
ConnectionPtr open_connection(const DatabaseConfig& config, const std::string& role);

// Capped exponential backoff with jitter for reconnect loops: 100ms, 200ms, ... up to 10s.
class ReconnectBackoff {
 public:
  std::chrono::milliseconds next();  // the wait before the next attempt
  void reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  int failures_ = 0;
};

}  // namespace pgjobd
