#pragma once
// One session with the database, as every user of one in src/db holds it (the job and
// schedule stores, the dashboard's store, the admin session, the LISTEN session, the
// benchmark's schema). It owns what each of them needs alike:
// - connecting on first use (open_connection: the peer defaults, the role's
//   application_name, a connect cut short once calls are), and preparing the session's
//   statements on each connection it opens;
// - the pooler mode: behind a transaction pooler (database.pooler: transaction) statements
//   go unnamed and nothing is set on the session (StatementSet, name_session say why);
// - the leak probe: a connection the server closed is noticed before a statement is sent
//   on it, since libpqxx 6.4 leaks a result for each statement sent on a dead connection;
// - each call's deadline (CallDeadline), and every failure turned into DbError with the
//   session dropped, to be reopened by the next call (after an error its state is unknown,
//   and reconnecting is cheap next to a wedged daemon);
// - optionally, reconnecting with backoff, for a user no loop paces (see
//   back_off_reconnects()).
// One thread uses a session at a time.

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "db/call_deadline.hpp"
#include "db/connection.hpp"
#include "db/pqxx_errors.hpp"
#include "db/statement_set.hpp"
#include "pgjobd/config.hpp"
#include "store/db_error.hpp"
#include "store/reconnect_backoff.hpp"

namespace pgjobd {

class DbSession {
 public:
  // role: the session's purpose, shown in pg_stat_activity as "pgjobd <role>".
  // statements: prepared on each connection the session opens (planned as `planning`
  // says), or sent unnamed behind a transaction pooler; none: nothing is prepared or set.
  // handed: a session already open to adopt at the first connect (renamed for `role`), or
  // replaced should the server have closed it meanwhile.
  DbSession(DatabaseConfig config, std::string role, std::vector<stmt::Statement> statements = {},
            Planning planning = Planning::kEachExecution, ConnectionPtr handed = nullptr);
  ~DbSession();
  DbSession(const DbSession&) = delete;
  DbSession& operator=(const DbSession&) = delete;

  // Runs on each connection the session opens, after its statements are prepared (on
  // connect_ahead()'s thread too). Set it before the first connect.
  void on_open(std::function<void(pqxx::connection_base&)> setup) { setup_ = std::move(setup); }
  // After a failed connect, the next one is not tried before a ReconnectBackoff wait (the
  // shortest it can draw) has passed: until then connect() throws that failure again at
  // once. For a session whose callers do not back off themselves (the dashboard's, called
  // by each page load): a loop that waits ReconnectBackoff::next() after each failure never
  // meets the gate, so it is not needed there.
  void back_off_reconnects() { back_off_ = true; }

  // Connects unless connected (the leak probe first: a connection the server closed is
  // replaced). Throws DbError, its message prefixed with `operation` ("" for none).
  void connect(const char* operation = "connect");
  // Opens the connection and sets it up on another thread; connect() takes it over (or
  // throws what opening it threw).
  void connect_ahead();
  bool connected() const;
  // Closes the session; the next connect() opens a new one.
  void drop() { conn_.reset(); }

  // The open connection, for fn() of call(). Throws pqxx::broken_connection when there is
  // none (inside call(): a DbError saying the connection was lost).
  pqxx::connection_base& connection();
  // The connection's socket, -1 when there is none (for poll()).
  int socket() const;
  // Behind a transaction pooler (database.pooler: transaction).
  bool transaction_pooler() const { return pooler_; }
  const DatabaseConfig& config() const { return config_; }

  // Runs fn() (which uses connection()) under database.call_timeout, shortenable.
  template <typename Fn>
  auto call(const char* operation, Fn&& fn) {
    return call(operation, config_.call_timeout, std::forward<Fn>(fn));
  }
  // Runs fn() under a deadline `bound` from now (0: none; shortenable: see CallDeadline).
  // On any exception the session is dropped and a DbError thrown: the timeout's when the
  // deadline shut the session down, else rethrow_as_db_error's (a DbError as it is).
  template <typename Fn>
  auto call(const char* operation, Millis bound, Fn&& fn, bool shortenable = true) {
    std::optional<CallDeadline> deadline;
    if (conn_) deadline.emplace(*conn_, bound, shortenable);
    try {
      return fn();
    } catch (...) {
      const bool timed_out = deadline && deadline->expired();
      const Millis armed = deadline ? deadline->bound() : bound;
      deadline.reset();  // disarmed before the session (and its descriptor) is closed
      conn_.reset();
      if (timed_out) throw_call_timed_out(operation, armed);
      rethrow_as_db_error(operation);
    }
  }

  // connect(operation), then call(operation, bound, fn): a failure to connect is reported
  // as the call's.
  template <typename Fn>
  auto connect_and_call(const char* operation, Millis bound, Fn&& fn) {
    connect(operation);
    return call(operation, bound, std::forward<Fn>(fn));
  }

  // One of the session's statements in `txn`: by name, or unnamed behind a pooler.
  template <typename... Args>
  pqxx::result execute(pqxx::transaction_base& txn, const char* name, Args&&... args) {
    return statements_->execute(txn, name, std::forward<Args>(args)...);
  }

 private:
  ConnectionPtr open(ConnectionPtr handed) const;

  const DatabaseConfig config_;
  const std::string role_;
  const bool pooler_;
  std::optional<StatementSet> statements_;
  std::function<void(pqxx::connection_base&)> setup_;
  ConnectionPtr conn_;
  ConnectionPtr handed_;  // the session given to the constructor, until first used
  bool back_off_ = false;
  ReconnectBackoff backoff_;
  std::chrono::steady_clock::time_point retry_at_;
  std::optional<DbError> last_failure_;  // the last connect's failure, while backing off
  // connect_ahead()'s work, until connect() takes its connection. Declared after conn_:
  // destroyed first, it waits for that work to end.
  std::future<ConnectionPtr> ahead_;
};

}  // namespace pgjobd
