// Makes libpqxx 6.4 leak a libpq result on purpose, every time, so that ctest can check that
// tests/lsan.supp hides exactly this leak (run_pqxx_cut_connection.sh runs it with and
// without the suppressions).
//
// The leak: connection_base::make_result(PGresult*, query) calls encoding_id() before the
// pqxx::result owns the PGresult. When the server has closed the session but libpq has not
// noticed yet, the statement's PQexec/PQprepare fails, the connection turns CONNECTION_BAD,
// PQclientEncoding returns -1, encoding_id throws broken_connection and the error result
// PQexec allocated is never freed. Here the session is cut with pg_terminate_backend from a
// second connection, then each cut connection runs one libpqxx call that makes a result.
// Exit codes: 0 every case leaked as expected (LeakSanitizer judges at exit), 2 the setup
// did not do what it should (no database, the cut was not seen).

#include <poll.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>

namespace {

constexpr auto kCutTimeout = std::chrono::seconds(10);

// Blocks until the server's end of `fd` is closed (FIN received), without reading from the
// socket: libpq must still believe the connection is fine when the next call starts.
void wait_for_eof(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + kCutTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    // Not POLLIN: the server's FATAL message arrives before the close and would wake us early.
    pollfd pfd{fd, POLLRDHUP, 0};
    const int ready = poll(&pfd, 1, 100);
    if (ready > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return;
  }
  throw std::runtime_error("the server did not close the terminated session's socket");
}

// A connection whose backend is gone while libpq still reports CONNECTION_OK.
std::unique_ptr<pqxx::connection> cut_connection(const std::string& url,
                                                 const std::string& prepare_sql = {}) {
  auto victim = std::make_unique<pqxx::connection>(url);
  // libpqxx 6.4 prepares lazily: the PQprepare happens at the first exec_prepared.
  if (!prepare_sql.empty()) victim->prepare("cut_probe", prepare_sql);
  pqxx::connection killer(url);
  pqxx::nontransaction txn(killer);
  const pqxx::result r = txn.exec_params("SELECT pg_terminate_backend($1)", victim->backendpid());
  if (!r[0][0].as<bool>()) throw std::runtime_error("pg_terminate_backend returned false");
  wait_for_eof(victim->sock());
  return victim;
}

// Runs `call` and requires the broken_connection that make_result throws after the leak.
template <typename Call>
void expect_broken(const char* name, Call call) {
  try {
    call();
  } catch (const pqxx::broken_connection&) {
    std::cout << name << ": broken_connection, as expected\n";
    return;
  }
  throw std::runtime_error(std::string(name) + ": no broken_connection on a cut connection");
}

class Receiver final : public pqxx::notification_receiver {
 public:
  explicit Receiver(pqxx::connection_base& conn) : notification_receiver(conn, "pgjobd_cut") {}
  void operator()(const std::string&, int) override {}
};

}  // namespace

int main() {
  const char* url = std::getenv("PGJOBD_TEST_DATABASE_URL");
  if (url == nullptr || *url == '\0') {
    std::cerr << "PGJOBD_TEST_DATABASE_URL is not set: run the tests with scripts/test.sh\n";
    return 2;
  }
  try {
    // exec: connection_base::exec (also what transactions' BEGIN and COMMIT go through).
    auto exec_conn = cut_connection(url);
    expect_broken("exec", [&] {
      pqxx::nontransaction txn(*exec_conn);
      txn.exec("SELECT 1");
    });

    // exec_prepared: the lazy PQprepare in connection_base::register_prepared.
    auto prepared_conn = cut_connection(url, "SELECT $1::int");
    expect_broken("exec_prepared", [&] {
      pqxx::nontransaction txn(*prepared_conn);
      txn.exec_prepared("cut_probe", 1);
    });

    // LISTEN: connection_base::add_receiver swallows the broken_connection itself, so the
    // leak is silent; the connection is then known to be closed.
    auto listen_conn = cut_connection(url);
    {
      Receiver receiver(*listen_conn);
      if (listen_conn->is_open()) throw std::runtime_error("LISTEN: connection still open");
      std::cout << "LISTEN: connection closed, as expected\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "setup failed: " << e.what() << '\n';
    return 2;
  }
  return 0;
}
