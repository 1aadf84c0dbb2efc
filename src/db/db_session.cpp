// DbSession: connecting, adopting a handed session, the leak probe and the reconnect gate.

#include "db/db_session.hpp"

#include <poll.h>

#include <pqxx/pqxx>

namespace pgjobd {
namespace {

// The most reads the leak probe makes: a session of ours without LISTEN has at most the
// server's reason for ending it and the end itself to read.
constexpr int kProbeReads = 3;

// Whether a read of `socket` would return at once (data, or the end of the session).
bool readable(int socket) {
  pollfd ready{socket, POLLIN, 0};
  return ::poll(&ready, 1, 0) > 0;
}

// Whether the server has not closed `conn` (restart, pg_terminate_backend), found without
// sending anything: libpqxx 6.4 leaks a result for each statement sent on a dead
// connection. get_notifs() only reads what is already on the socket. A server ending the
// session sends its reason, then closes: a read may take the reason and leave the end for
// the next one, so the socket is read until it has nothing.
bool still_open(pqxx::connection_base& conn) {
  try {
    conn.get_notifs();
    for (int reads = 1; reads < kProbeReads && readable(conn.sock()); ++reads) {
      conn.get_notifs();
    }
    return connection_ok(conn);
  } catch (const pqxx::broken_connection&) {
    return false;
  }
}

}  // namespace

DbSession::DbSession(DatabaseConfig config, std::string role,
                     std::vector<stmt::Statement> statements, Planning planning,
                     ConnectionPtr handed)
    : config_(std::move(config)),
      role_(std::move(role)),
      pooler_(config_.pooler == "transaction"),
      handed_(std::move(handed)) {
  if (!statements.empty()) statements_.emplace(std::move(statements), pooler_, planning);
}

DbSession::~DbSession() = default;

bool DbSession::connected() const { return conn_ && conn_->is_open(); }

pqxx::connection_base& DbSession::connection() {
  if (!conn_) throw pqxx::broken_connection("the session is closed");
  return *conn_;
}

int DbSession::socket() const { return conn_ ? conn_->sock() : -1; }

// The handed session, renamed for its role, or a new one if none was handed over or the
// server closed it meanwhile (restart, pg_terminate_backend); set up either way.
ConnectionPtr DbSession::open(ConnectionPtr handed) const {
  ConnectionPtr conn;
  if (handed && still_open(*handed)) {
    try {
      name_session(*handed, config_, role_);
      conn = std::move(handed);
    } catch (const pqxx::broken_connection&) {
      // Opened anew below.
    }
  }
  if (!conn) conn = open_connection(config_, role_);
  if (statements_) statements_->prepare(*conn);
  if (setup_) setup_(*conn);
  return conn;
}

void DbSession::connect(const char* operation) {
  if (connected()) {
    if (still_open(*conn_)) return;
    conn_.reset();  // replaced below
  }
  if (last_failure_ && std::chrono::steady_clock::now() < retry_at_) {
    throw DbError(*last_failure_);
  }
  try {
    call(operation, Millis(0), [&] {
      // ahead_.get() rethrows what opening it threw; the next connect() retries.
      conn_ = ahead_.valid() ? ahead_.get() : open(std::move(handed_));
      return 0;
    });
    // On this thread, under the call deadline (open() may run on another thread, and
    // before the session is there to arm one).
    if (statements_) {
      call(operation, [&] {
        statements_->resolve_functions(*conn_, config_.schema);
        return 0;
      });
    }
  } catch (const DbError& e) {
    if (back_off_) {
      // From the failure on: a connect that failed slowly (connect_timeout) gates as long.
      retry_at_ = std::chrono::steady_clock::now() + backoff_.shortest();
      backoff_.next();
      last_failure_ = e;
    }
    throw;
  }
  backoff_.reset();
  last_failure_.reset();
}

void DbSession::connect_ahead() {
  if (conn_ || ahead_.valid()) return;
  // The connection is only handed over through the future: nothing else touches it, and
  // open() only reads the session's settings.
  ahead_ = std::async(std::launch::async, [this, handed = std::move(handed_)]() mutable {
    return open(std::move(handed));
  });
}

}  // namespace pgjobd
