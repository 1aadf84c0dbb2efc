// libpqxx exceptions to DbError: which of them mean the session is gone, and their SQLSTATE.

#include "db/pqxx_errors.hpp"

#include <pqxx/pqxx>
#include <string>
#include <utility>

#include "log/logging.hpp"
#include "log/secrets.hpp"

namespace pgjobd {

namespace {

// A DbError's text reaches logs, last_error and /readyz: no message may carry a known
// secret (log/secrets.hpp), whichever statement or server message produced it.
[[noreturn]] void throw_db_error(const std::string& what, std::string sqlstate,
                                 bool connection_lost) {
  throw DbError(scrub_process_secrets(what), std::move(sqlstate), connection_lost);
}

}  // namespace

void throw_call_timed_out(const std::string& operation, Millis bound) {
  throw DbError(operation + ": no answer from the database within " + format_duration(bound) +
                    " (database.call_timeout); the session was closed and a new one is opened",
                "", true, /*timed_out=*/true);
}

void rethrow_as_db_error(const std::string& operation) {
  const std::string prefix = operation.empty() ? "" : operation + ": ";
  // libpqxx 6.4 throws a few exceptions without the SQLSTATE it dispatched on
  // (insufficient_privilege, too_many_connections, the transaction_rollback family): their
  // type is all that is left of it, so the codes are restored here from the type.
  try {
    throw;
  } catch (const pqxx::too_many_connections& e) {
    throw_db_error(prefix + mask_password(e.what()), "53300", true);
  } catch (const pqxx::broken_connection& e) {
    // libpq's message can echo parts of the conninfo.
    throw_db_error(prefix + "connection lost: " + mask_password(e.what()), "", true);
  } catch (const pqxx::insufficient_privilege& e) {
    throw_db_error(prefix + e.what(), e.sqlstate().empty() ? "42501" : e.sqlstate(), false);
  } catch (const pqxx::sql_error& e) {
    throw_db_error(prefix + e.what(), e.sqlstate(), false);
  } catch (const pqxx::serialization_failure& e) {
    throw_db_error(prefix + e.what(), "40001", false);
  } catch (const pqxx::deadlock_detected& e) {
    throw_db_error(prefix + e.what(), "40P01", false);
  } catch (const pqxx::statement_completion_unknown& e) {
    // The connection broke while the statement ran: it may or may not have been applied.
    throw_db_error(prefix + e.what(), "40003", true);
  } catch (const pqxx::transaction_rollback& e) {
    throw_db_error(prefix + e.what(), "40000", false);
  } catch (const pqxx::in_doubt_error& e) {
    // The connection broke during COMMIT: the change may or may not have been applied.
    throw_db_error(prefix + "commit in doubt: " + e.what(), "", true);
  } catch (const pqxx::failure& e) {
    throw_db_error(prefix + mask_password(e.what()), "", false);
  }
}

}  // namespace pgjobd
