// libpqxx exceptions to DbError: which of them mean the session is gone, and their SQLSTATE.

#include "db/pqxx_errors.hpp"

#include <algorithm>
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

// How libpq begins each line of a server's message: the severity, a colon, two spaces.
constexpr std::string_view kSeverityPrefixes[] = {
    "PANIC:  ", "FATAL:  ", "ERROR:  ", "WARNING:  ", "NOTICE:  "};

std::string_view trimmed_view(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

}  // namespace

std::string one_line_message(std::string_view message) {
  std::string text;
  std::size_t start = 0;
  while (start < message.size()) {
    const std::size_t end = std::min(message.find('\n', start), message.size());
    const std::string_view raw = message.substr(start, end - start);
    start = end + 1;
    std::string line(trimmed_view(raw));
    // After a prefix of ours ("connection lost: ") too: wherever libpq's form appears.
    for (const std::string_view prefix : kSeverityPrefixes) {
      for (auto at = line.find(prefix); at != std::string::npos; at = line.find(prefix, at)) {
        line.erase(at, prefix.size());
      }
    }
    if (line.empty()) continue;
    // A tab-indented line continues the sentence above it; another line is a message of
    // its own (libpq reports each host or SSL attempt it made).
    if (!text.empty()) text += raw.starts_with('\t') ? " " : "; ";
    text += line;
  }
  return text;
}

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
