// Connection opening, and running a statement with typed parameters on a connection.

#include "db/connection.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <memory>
#include <new>
#include <pqxx/pqxx>
#include <utility>
#include <vector>

#include "db/call_deadline.hpp"
#include "log/conninfo_display.hpp"
#include "log/logging.hpp"
#include "log/secrets.hpp"

namespace pgjobd {
namespace {

// PQconnectStartParams, polled until it succeeds, fails or `cap` has passed (then the
// attempt is given up: a handle whose status is CONNECTION_BAD, as PQconnectdbParams
// returns for a failure).
PGconn* connect_within(const char* const* keywords, const char* const* values, Millis cap) {
  PGconn* conn = PQconnectStartParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr || PQstatus(conn) == CONNECTION_BAD) return conn;
  const auto deadline = std::chrono::steady_clock::now() + cap;
  PostgresPollingStatusType state = PGRES_POLLING_WRITING;  // as libpq's documentation says
  while (state != PGRES_POLLING_OK && state != PGRES_POLLING_FAILED) {
    const auto left =
        std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      PQfinish(conn);
      throw pqxx::broken_connection("connecting gave up after " + format_duration(cap) +
                                    " (the daemon is stopping)");
    }
    pollfd wait{PQsocket(conn),
                static_cast<short>(state == PGRES_POLLING_READING ? POLLIN : POLLOUT), 0};
    ::poll(&wait, 1, static_cast<int>(left.count()));
    state = PQconnectPoll(conn);
  }
  return conn;
}

// libpq's settings for noticing a peer that is gone without a word (a host that died, a
// network path that drops packets): by default Linux waits two hours before the first
// keepalive and retransmits unacknowledged data for about fifteen minutes. With these, an
// idle session learns in about 11 s (5 s idle, then 3 probes 2 s apart) and a request that
// is never acknowledged fails after 10 s; a host that does not answer a connect is given up
// after 10 s (per host of a multi-host URL). A call that waits on a live but stuck server
// (a commit waiting for a synchronous standby) is not covered by these: the call deadlines
// (call_deadline.hpp) are. README "Connection settings" says how a URL overrides them.
constexpr std::pair<const char*, const char*> kPeerDefaults[] = {
    {"connect_timeout", "10"},    {"keepalives", "1"},       {"keepalives_idle", "5"},
    {"keepalives_interval", "2"}, {"keepalives_count", "3"}, {"tcp_user_timeout", "10000"},
};

// libpqxx 6.4 keeps the PGconn to itself, and its exec_params sends no parameter types.
// A connection policy is libpqxx's documented extension point for how a connection is
// made: this one connects like pqxx::connection and remembers the handle it made, so that
// exec_typed can send parameter types through libpq on the same session.
//
// Once calls are shortened (CallDeadline::shorten_all: a drain), a connect is given no more
// than that cap either: libpq's own connect_timeout (10 s per host) would otherwise hold
// each loop's last attempt, one after another, far past the drain's bound. It then runs on
// libpq's non-blocking API, which honours no connect_timeout and tries the next host of a
// multi-host URL only on failure: good enough for the last seconds of a process, not for
// its life.
//
// It also opens the session with PQconnectdbParams rather than PQconnectdb, so that the
// daemon's defaults for noticing a dead peer (kPeerDefaults) come before the user's
// conninfo, which libpq reads after them: anything the user's URL sets wins.
class HandleKeepingConnect final : public pqxx::connect_direct {
 public:
  explicit HandleKeepingConnect(const std::string& options) : pqxx::connect_direct(options) {}
  handle do_startconnect(handle orig) override {
    if (orig != nullptr) return handle_ = orig;
    std::vector<const char*> keywords;
    std::vector<const char*> values;
    for (const auto& [keyword, value] : kPeerDefaults) {
      keywords.push_back(keyword);
      values.push_back(value);
    }
    keywords.push_back("dbname");  // expanded: a URL or key=value conninfo
    values.push_back(options().c_str());
    keywords.push_back(nullptr);
    values.push_back(nullptr);
    const Millis cap = CallDeadline::shortened();
    orig = cap.count() > 0 ? connect_within(keywords.data(), values.data(), cap)
                           : PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/1);
    if (orig == nullptr) throw std::bad_alloc();
    if (PQstatus(orig) != CONNECTION_OK) {
      const std::string message = PQerrorMessage(orig);
      PQfinish(orig);
      throw pqxx::broken_connection(message);
    }
    return handle_ = orig;
  }
  handle do_completeconnect(handle orig) override {
    handle_ = pqxx::connect_direct::do_completeconnect(orig);
    return handle_;
  }
  handle do_dropconnect(handle orig) noexcept override {
    handle_ = pqxx::connect_direct::do_dropconnect(orig);
    return handle_;
  }
  handle do_disconnect(handle orig) noexcept override {
    handle_ = pqxx::connect_direct::do_disconnect(orig);
    return handle_;
  }
  handle current() const { return handle_; }

 private:
  handle handle_ = nullptr;
};

// pqxx::basic_connection_base<HandleKeepingConnect>, plus access to the policy's handle.

class Connection final : public pqxx::connection_base {
 public:
  explicit Connection(std::string options)
      : pqxx::connection_base(policy_), options_(std::move(options)), policy_(options_) {
    init();
  }
  ~Connection() noexcept { close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  PGconn* handle() const { return policy_.current(); }

 private:
  std::string options_;  // initialised before the policy, which keeps a reference
  HandleKeepingConnect policy_;
};

}  // namespace

void ConnectionDeleter::operator()(pqxx::connection_base* conn) const {
  delete static_cast<Connection*>(conn);
}

ConnectionPtr open_connection(const DatabaseConfig& config, const std::string& role) {
  // libpq's message for a conninfo it cannot parse quotes the piece it stopped at, which
  // can be the password in a spelling no scrubbing recognises (`password s3cr3t`).
  if (!conninfo_parses(config.url)) throw pqxx::broken_connection(describe_conninfo(config.url));
  ConnectionPtr conn;
  try {
    conn.reset(new Connection(config.url));
  } catch (const pqxx::broken_connection& e) {
    // libpq's message can echo parts of the conninfo, a malformed one too ("invalid
    // percent-encoded token: \"50%off\""): mask the patterns and scrub every spelling of
    // this conninfo's password.
    throw pqxx::broken_connection(
        scrub_secrets(mask_password(e.what()), conninfo_password_candidates(config.url)));
  }
  name_session(*conn, config, role);
  return conn;
}

void name_session(pqxx::connection_base& conn, const DatabaseConfig& config,
                  const std::string& role) {
  // A setting for the session: behind a transaction pooler the server connection is other
  // clients' too between our transactions, so there it is left alone.
  if (config.pooler == "transaction") return;
  pqxx::nontransaction txn(conn);
  txn.exec_params("SELECT set_config('application_name', $1, false)", "pgjobd " + role);
}

int connection_socket(pqxx::connection_base& conn) {
  // Every ConnectionPtr holds a Connection (open_connection makes them all).
  PGconn* handle = static_cast<Connection&>(conn).handle();
  return handle == nullptr ? -1 : PQsocket(handle);
}

bool connection_ok(pqxx::connection_base& conn) {
  PGconn* handle = static_cast<Connection&>(conn).handle();
  return handle != nullptr && PQstatus(handle) == CONNECTION_OK;
}

std::string connection_option(pqxx::connection_base& conn, const std::string& keyword) {
  PGconn* handle = static_cast<Connection&>(conn).handle();
  if (handle == nullptr) return "";
  const std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(PQconninfo(handle),
                                                                             &PQconninfoFree);
  for (const PQconninfoOption* o = options.get(); o != nullptr && o->keyword != nullptr; ++o) {
    if (keyword == o->keyword) return o->val != nullptr ? o->val : "";
  }
  return "";
}

void PgResultDeleter::operator()(pg_result* result) const { PQclear(result); }

namespace {

// `handle` if its session is usable.
PGconn* usable(PGconn* handle) {
  if (handle == nullptr || PQstatus(handle) != CONNECTION_OK) {
    throw pqxx::broken_connection("connection lost");
  }
  return handle;
}

// libpqxx 6.4 gives a transaction's libpq handle out only to its large objects (a protected
// static of pqxx::largeobject): this reaches it for a transaction on any connection, not
// only one open_connection opened.
struct TransactionHandle : pqxx::largeobject {
  static PGconn* of(const pqxx::dbtransaction& txn) { return raw_connection(txn); }
};

// Throws what libpqxx would for a failed `result` of `sql` (nullptr: libpq had none).
[[noreturn]] void throw_failure(PGconn* handle, const PGresult* result, const std::string& sql) {
  if (PQstatus(handle) != CONNECTION_OK) {
    throw pqxx::broken_connection(PQerrorMessage(handle));
  }
  const char* sqlstate = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string message =
      result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(handle);
  throw pqxx::sql_error(message, sql, sqlstate);
}

}  // namespace

PgResult exec_typed(pqxx::connection_base& conn, const std::string& sql,
                    const std::vector<TypedParam>& params) {
  // Every ConnectionPtr holds a Connection (open_connection makes them all).
  PGconn* handle = usable(static_cast<Connection&>(conn).handle());
  std::vector<Oid> types;
  std::vector<const char*> values;
  types.reserve(params.size());
  values.reserve(params.size());
  for (const TypedParam& param : params) {
    types.push_back(param.type_oid);
    values.push_back(param.value.c_str());
  }
  // PQexecParams: the extended protocol, whose Parse message takes exactly one statement
  // ("cannot insert multiple commands into a prepared statement").
  PgResult result(PQexecParams(handle, sql.c_str(), static_cast<int>(params.size()), types.data(),
                               values.data(), nullptr, nullptr, 0));
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
    return result;
  }
  if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH) {
    // No data to give or take: end the COPY so the session is usable, then report.
    if (status == PGRES_COPY_IN) PQputCopyEnd(handle, "pgjobd runs no COPY");
    char* buffer = nullptr;
    while (PQgetCopyData(handle, &buffer, 0) > 0) PQfreemem(buffer);
    while (PGresult* rest = PQgetResult(handle)) PQclear(rest);
    throw pqxx::sql_error("a handler's statement cannot be a COPY", sql, "0A000");
  }
  throw_failure(handle, result.get(), sql);
}

StatementShape describe_statement(pqxx::dbtransaction& txn, const std::string& sql) {
  PGconn* handle = usable(TransactionHandle::of(txn));
  PgResult parsed(PQprepare(handle, "", sql.c_str(), 0, nullptr));
  if (!parsed || PQresultStatus(parsed.get()) != PGRES_COMMAND_OK) {
    throw_failure(handle, parsed.get(), sql);
  }
  PgResult described(PQdescribePrepared(handle, ""));
  if (!described || PQresultStatus(described.get()) != PGRES_COMMAND_OK) {
    throw_failure(handle, described.get(), sql);
  }
  StatementShape shape;
  for (int i = 0; i < PQnparams(described.get()); ++i) {
    shape.parameter_types.push_back(PQparamtype(described.get(), i));
  }
  for (int i = 0; i < PQnfields(described.get()); ++i) {
    shape.columns.push_back({PQftype(described.get(), i), PQfmod(described.get(), i)});
  }
  return shape;
}

}  // namespace pgjobd
