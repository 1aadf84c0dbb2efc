// The translation of libpqxx exceptions into DbError.

#include "db/pg_errors.hpp"

#include <pqxx/pqxx>

#include "log/logging.hpp"
#include "store/db_error.hpp"

namespace pgjobd {

void rethrow_as_db_error(const std::string& operation) {
  try {
    throw;
  } catch (const pqxx::broken_connection& e) {
    throw DbError(operation + ": connection lost: " + mask_password(e.what()), "", true);
  } catch (const pqxx::sql_error& e) {
    throw DbError(operation + ": " + e.what(), e.sqlstate(), false);
  } catch (const pqxx::in_doubt_error& e) {
    throw DbError(operation + ": commit in doubt: " + e.what(), "", true);
  } catch (const pqxx::failure& e) {
    // Other libpqxx failures happen on a session in an unknown state: treat it as lost.
    throw DbError(operation + ": " + mask_password(e.what()), "", true);
  }
}

}  // namespace pgjobd
