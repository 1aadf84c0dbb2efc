// Database calls against a real server: the deadline that abandons a call left without an
// answer, and the TCP settings every session is opened with.

#include <gtest/gtest.h>

#include <chrono>
#include <pqxx/pqxx>
#include <thread>

#include "db/connection.hpp"
#include "db/db_session.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using DeadlineClock = std::chrono::steady_clock;

int sleep_on(DbSession& session, Millis bound, const char* seconds) {
  session.connect();
  return session.call("test call", bound, [&] {
    pqxx::nontransaction txn(session.connection());
    txn.exec(std::string("SELECT pg_sleep(") + seconds + ")");
    return 1;
  });
}

TEST(CallDeadline, ACallLeftWithoutAnAnswerIsAbandonedAtItsDeadline) {
  DbSession session(database_at(), "deadline-test");
  const auto started = DeadlineClock::now();
  try {
    sleep_on(session, Millis(300), "30");
    FAIL() << "the call returned although it slept past its deadline";
  } catch (const DbError& e) {
    EXPECT_TRUE(e.timed_out()) << e.what();
    EXPECT_TRUE(e.connection_lost()) << e.what();
    EXPECT_NE(std::string(e.what()).find("test call: no answer from the database within 300ms"),
              std::string::npos)
        << e.what();
  }
  // Abandoned at the deadline, not when the server's sleep ends.
  EXPECT_LT(DeadlineClock::now() - started, std::chrono::seconds(10));
  EXPECT_FALSE(session.connected()) << "the abandoned session must be dropped";
}

TEST(CallDeadline, ACallThatAnswersInTimeKeepsItsSession) {
  DbSession session(database_at(), "deadline-test");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sleep_on(session, Millis(300), "0.001"), 1);
  ASSERT_TRUE(session.connected());
  // Disarmed when they returned: past every deadline they had, the session still works.
  // (An absence cannot be awaited: the wait is the deadlines' length, twice.)
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  pqxx::nontransaction txn(session.connection());
  EXPECT_EQ(txn.exec("SELECT 7")[0][0].as<int>(), 7);
}

TEST(CallDeadline, ZeroMeansNoDeadline) {
  DbSession session(database_at(), "deadline-test");
  EXPECT_EQ(sleep_on(session, Millis(0), "0.5"), 1);
  EXPECT_TRUE(session.connected());
}

TEST(PeerSettings, EverySessionNoticesADeadPeerInSeconds) {
  ConnectionPtr session = open_connection(database_at(), "peer-test");
  EXPECT_EQ(connection_option(*session, "keepalives"), "1");
  EXPECT_EQ(connection_option(*session, "keepalives_idle"), "5");
  EXPECT_EQ(connection_option(*session, "keepalives_interval"), "2");
  EXPECT_EQ(connection_option(*session, "keepalives_count"), "3");
  EXPECT_EQ(connection_option(*session, "tcp_user_timeout"), "10000");
  EXPECT_EQ(connection_option(*session, "connect_timeout"), "10");
}

TEST(PeerSettings, TheUrlsOwnSettingsWin) {
  const std::string base = test_database_url();
  const std::string url = base + (base.find('?') == std::string::npos ? "?" : "&") +
                          "tcp_user_timeout=2500&keepalives_idle=30";
  ConnectionPtr session = open_connection(database_at(url), "peer-test");
  EXPECT_EQ(connection_option(*session, "tcp_user_timeout"), "2500");
  EXPECT_EQ(connection_option(*session, "keepalives_idle"), "30");
  EXPECT_EQ(connection_option(*session, "keepalives_count"), "3");  // not set there: ours
}

TEST(PeerSettings, AKeyValueConninfoIsReadAsWell) {
  // The same server, written as key=value: the daemon's defaults and the user's settings
  // combine the same way.
  ConnectionPtr probe = open_connection(database_at(), "peer-test");
  const std::string kv = "host=" + connection_option(*probe, "host") +
                         " port=" + connection_option(*probe, "port") +
                         " user=" + connection_option(*probe, "user") +
                         " dbname=" + connection_option(*probe, "dbname") + " keepalives_count=7";
  ConnectionPtr session = open_connection(database_at(kv), "peer-test");
  EXPECT_EQ(connection_option(*session, "keepalives_count"), "7");
  EXPECT_EQ(connection_option(*session, "tcp_user_timeout"), "10000");
}

}  // namespace
}  // namespace pgjobd::testing
