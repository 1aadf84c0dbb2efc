// Connection opening and the reconnect backoff schedule.

#include "db/connection.hpp"

#include <algorithm>
#include <pqxx/pqxx>
#include <random>

#include "log/logging.hpp"

namespace pgjobd {

void ConnectionDeleter::operator()(pqxx::connection_base* conn) const {
  delete static_cast<pqxx::connection*>(conn);
}

ConnectionPtr open_connection(const DatabaseConfig& config, const std::string& role) {
  ConnectionPtr conn;
  try {
    conn.reset(new pqxx::connection(config.url));
  } catch (const pqxx::broken_connection& e) {
    // libpq's message can echo parts of the conninfo; never let a password through.
    throw pqxx::broken_connection(mask_password(e.what()));
  }
  pqxx::nontransaction txn(*conn);
  txn.exec_params("SELECT set_config('application_name', $1, false)", "pgjobd " + role);
  return conn;
}

}  // namespace pgjobd
