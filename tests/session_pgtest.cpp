// DbSession against PostgreSQL (and a socket that refuses to be one): reconnecting after a
// lost connection, the leak probe, the reconnect gate of a session that backs off, and
// what the pooler mode leaves out. Its call deadline: call_deadline_pgtest.cpp.

#include "db/db_session.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

using SessionClock = std::chrono::steady_clock;

std::string session_query(DbSession& session, const std::string& sql) {
  session.connect();
  return session.call("test query", [&] {
    pqxx::nontransaction txn(session.connection());
    const pqxx::result rows = txn.exec(sql);
    return rows.empty() || rows[0][0].is_null() ? std::string() : rows[0][0].as<std::string>();
  });
}

// Ends backend `pid` from another session and waits until it is gone.
void terminate_backend(const std::string& pid) {
  ConnectionPtr admin = open_connection(database_at(), "session-test-admin");
  pqxx::nontransaction txn(*admin);
  txn.exec("SELECT pg_terminate_backend(" + pid + ")");
  ASSERT_TRUE(wait_until(
      [&] {
        return txn.exec("SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid)[0][0]
                   .as<int>() == 0;
      },
      std::chrono::seconds(20)));
}

// A call whose connection breaks under it fails as connection_lost() and drops the
// session; the next call opens a new one, set up again (on_open) like the first.
TEST(DbSession, ACallThatLostItsConnectionFailsAndTheNextOneReconnects) {
  DbSession session(database_at(), "session-test");
  int opened = 0;
  session.on_open([&](pqxx::connection_base&) { ++opened; });
  const std::string first = session_query(session, "SELECT pg_backend_pid()");
  EXPECT_EQ(opened, 1);
  std::thread killer([&] {
    ConnectionPtr admin = open_connection(database_at(), "session-test-admin");
    pqxx::nontransaction txn(*admin);
    ASSERT_TRUE(wait_until(
        [&] {
          return txn.exec("SELECT count(*) FROM pg_stat_activity WHERE pid = " + first +
                          " AND wait_event = 'PgSleep'")[0][0]
                     .as<int>() == 1;
        },
        std::chrono::seconds(20)));
    txn.exec("SELECT pg_terminate_backend(" + first + ")");
  });
  try {
    session_query(session, "SELECT pg_sleep(30)");
    ADD_FAILURE() << "the call survived its terminated backend";
  } catch (const DbError& e) {
    EXPECT_TRUE(e.connection_lost()) << e.what();
    EXPECT_FALSE(e.timed_out()) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("test query: ", 0), 0u) << e.what();
  }
  killer.join();
  EXPECT_FALSE(session.connected());
  const std::string second = session_query(session, "SELECT pg_backend_pid()");
  EXPECT_NE(second, first);
  EXPECT_EQ(opened, 2);
}

// The leak probe: a connection the server closed while the session was idle is replaced
// before a statement is sent on it (libpqxx 6.4 leaks a result for each statement sent on
// a dead connection), so the call succeeds instead of failing.
TEST(DbSession, AnIdleConnectionTheServerClosedIsReplacedBeforeTheNextCall) {
  DbSession session(database_at(), "session-test");
  const std::string first = session_query(session, "SELECT pg_backend_pid()");
  terminate_backend(first);
  // The backend leaves pg_stat_activity, and sends its reason, a moment before its socket
  // closes: the probe reads what has arrived, so the test waits for the close to arrive.
  ASSERT_TRUE(wait_until(
      [&] {
        pollfd ready{session.socket(), POLLRDHUP, 0};
        return ::poll(&ready, 1, 0) > 0 && (ready.revents & POLLRDHUP) != 0;
      },
      std::chrono::seconds(20)));
  std::string second;
  EXPECT_NO_THROW(second = session_query(session, "SELECT pg_backend_pid()"));
  EXPECT_NE(second, "");
  EXPECT_NE(second, first);
}

// Accepts connections on a local port and closes each at once, counting them: a server a
// connect reaches and fails on.
class RefusingServer {
 public:
  RefusingServer() : socket_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(socket_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(socket_, 16) != 0 ||
        ::getsockname(socket_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "no listening socket";
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::jthread([this](const std::stop_token& stop) {
      while (!stop.stop_requested()) {
        pollfd ready{socket_, POLLIN, 0};
        if (::poll(&ready, 1, 20) <= 0) continue;
        const int client = ::accept(socket_, nullptr, nullptr);
        if (client < 0) continue;
        accepted_.fetch_add(1);  // before the close the client sees
        ::close(client);
      }
    });
  }
  ~RefusingServer() {
    thread_.request_stop();
    thread_.join();
    ::close(socket_);
  }
  RefusingServer(const RefusingServer&) = delete;
  RefusingServer& operator=(const RefusingServer&) = delete;

  std::string url() const {
    return "postgresql://nobody@127.0.0.1:" + std::to_string(port_) +
           "/none?sslmode=disable&gssencmode=disable";
  }
  int accepted() const { return accepted_.load(); }

 private:
  int socket_;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::jthread thread_;
};

// A session that backs off (the dashboard's) does not try again before the shortest
// ReconnectBackoff wait has passed since its last failed connect: it throws that failure
// again at once. Then it tries, and the gate doubles.
TEST(DbSession, ABackingOffSessionRetriesAFailedConnectOnlyAfterItsBackoff) {
  RefusingServer server;
  DbSession session(database_at(server.url()), "session-test");
  session.back_off_reconnects();
  std::string failure;
  const auto first_tried_at = SessionClock::now();
  try {
    session.connect();
    FAIL() << "connected to a socket that closes every connection";
  } catch (const DbError& e) {
    EXPECT_TRUE(e.connection_lost()) << e.what();
    failure = e.what();
  }
  ASSERT_EQ(server.accepted(), 1);
  try {
    session.connect();
    FAIL() << "connected to a socket that closes every connection";
  } catch (const DbError& e) {
    EXPECT_EQ(e.what(), failure);
    EXPECT_TRUE(e.connection_lost());
  }
  // A real attempt is counted before it fails (the server closes after counting).
  EXPECT_EQ(server.accepted(), 1) << "the connect was tried again within its backoff";

  // Tries until the server has seen `accepted` attempts; returns when the last try began.
  const auto attempt_until = [&](int accepted) {
    SessionClock::time_point tried_at;
    EXPECT_TRUE(wait_until(
        [&] {
          tried_at = SessionClock::now();
          try {
            session.connect();
          } catch (const DbError&) {
          }
          return server.accepted() == accepted;
        },
        std::chrono::seconds(10)));
    return tried_at;
  };
  // The gate runs from each failure, which comes after its try began.
  const auto second_tried_at = attempt_until(2);
  EXPECT_GE(second_tried_at - first_tried_at, std::chrono::milliseconds(80));  // 100 ms - 20%
  const auto third_tried_at = attempt_until(3);
  EXPECT_GE(third_tried_at - second_tried_at, std::chrono::milliseconds(160));  // 200 ms - 20%
}

// Sessions whose loop backs off by itself (every store but the dashboard's) try each
// connect they are asked for.
TEST(DbSession, ASessionThatDoesNotBackOffTriesEveryConnect) {
  RefusingServer server;
  DbSession session(database_at(server.url()), "session-test");
  for (int i = 1; i <= 3; ++i) {
    EXPECT_THROW(session.connect(), DbError);
    EXPECT_EQ(server.accepted(), i);
  }
}

// Its own statements are prepared on each connection, with the planner's setting for
// their use; behind a transaction pooler nothing is prepared or set on the server session
// (the next transaction may run on another client's), and they go unnamed.
TEST(DbSession, BehindATransactionPoolerNothingIsPreparedOrSetOnTheSession) {
  for (const bool pooler : {false, true}) {
    SCOPED_TRACE(pooler ? "pooler: transaction" : "pooler: none");
    DatabaseConfig config = database_at();
    config.pooler = pooler ? "transaction" : "none";
    DbSession session(config, "session-pooler-test", {{"session_test_answer", "SELECT $1::int"}},
                      Planning::kEachExecution);
    EXPECT_EQ(session.transaction_pooler(), pooler);
    session.connect();
    const int answer = session.call("test", [&] {
      pqxx::nontransaction txn(session.connection());
      return session.execute(txn, "session_test_answer", 42)[0][0].as<int>();
    });
    EXPECT_EQ(answer, 42);
    EXPECT_EQ(session_query(session,
                            "SELECT count(*) FROM pg_prepared_statements"
                            " WHERE name = 'session_test_answer'"),
              pooler ? "0" : "1");
    EXPECT_EQ(session_query(session, "SELECT current_setting('plan_cache_mode')"),
              pooler ? "auto" : "force_custom_plan");
    EXPECT_EQ(session_query(session, "SELECT current_setting('application_name')") ==
                  "pgjobd session-pooler-test",
              !pooler);
  }
}

}  // namespace
}  // namespace pgjobd::testing
