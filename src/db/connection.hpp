#pragma once
// Opening PostgreSQL connections. Only files that talk to the database include pqxx.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "pgjobd/config.hpp"
#include "store/reconnect_backoff.hpp"

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

}  // namespace pgjobd
