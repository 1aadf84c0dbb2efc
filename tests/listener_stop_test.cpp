// stop_with_knocks: a civetweb listener stops in milliseconds while a client holds a
// connection to it without sending on it, whole or half a request. civetweb's worker
// waits for the next request in 2 s steps and checks for a stop only between them; mg_stop
// waits for it: a daemon's exit took up to 2 s after `drained` with a browser's idle socket
// to the dashboard (issue 45).

#include "http/listener_stop.hpp"

#include <civetweb.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace pgjobd {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kAnswer =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok";

int answer_ok(mg_connection* conn, void* /*data*/) {
  mg_printf(conn, "%s", kAnswer);
  return 200;
}

// A civetweb listener on loopback that keeps connections alive for 10 s (as a browser
// holds its idle socket), so that after an answer its worker waits on the same connection
// for the next request: the wait a stop used to sit out.
class KeepAliveListener {
 public:
  KeepAliveListener() {
    mg_init_library(0);
    const char* options[] = {"listening_ports",
                             "127.0.0.1:0",
                             "num_threads",
                             "2",
                             "enable_keep_alive",
                             "yes",
                             "keep_alive_timeout_ms",
                             "10000",
                             "request_timeout_ms",
                             "10000",
                             nullptr};
    mg_callbacks callbacks{};
    context_ = mg_start(&callbacks, nullptr, options);
    if (context_ == nullptr) return;
    mg_set_request_handler(context_, "/", &answer_ok, nullptr);
    mg_server_port listening[1];
    if (mg_get_server_ports(context_, 1, listening) == 1) port_ = listening[0].port;
  }
  ~KeepAliveListener() {
    if (context_ != nullptr) mg_stop(context_);
    mg_exit_library();
  }
  KeepAliveListener(const KeepAliveListener&) = delete;
  KeepAliveListener& operator=(const KeepAliveListener&) = delete;

  int port() const { return port_; }
  // Seconds stop_with_knocks took to stop it.
  double stop() {
    const auto before = Clock::now();
    stop_with_knocks("127.0.0.1", port_, [this] { mg_stop(context_); });
    context_ = nullptr;
    return std::chrono::duration<double>(Clock::now() - before).count();
  }

 private:
  mg_context* context_ = nullptr;
  int port_ = 0;
};

class Client {
 public:
  explicit Client(int port) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  }
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  void send_text(const std::string& text) const {
    if (text.empty()) return;
    (void)send(fd_, text.data(), text.size(), MSG_NOSIGNAL);
  }
  void request(const std::string& path) const {
    send_text("GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n");
  }
  // The whole answer (kAnswer), read until its body or the end of the connection.
  bool answered() const {
    std::string answer;
    char buffer[512];
    while (answer.size() < 2 || answer.compare(answer.size() - 2, 2, "ok") != 0) {
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return false;
      answer.append(buffer, static_cast<std::size_t>(n));
    }
    return answer == kAnswer;
  }

 private:
  int fd_;
  bool connected_ = false;
};

// A client has had an answer on a kept-alive connection (its worker now waits for the next
// request) and then sends `then` (possibly nothing); the stop must not wait for it.
void expect_quick_stop(const std::string& then) {
  KeepAliveListener listener;
  ASSERT_GT(listener.port(), 0);
  const Client client(listener.port());
  ASSERT_TRUE(client.connected());
  client.request("/");
  ASSERT_TRUE(client.answered());
  client.send_text(then);
  const double stop = listener.stop();
  EXPECT_LT(stop, 0.5) << "the stop took " << stop << " s";
}

TEST(ListenerStop, StopsWhileAClientHoldsAnIdleConnection) { expect_quick_stop(""); }

TEST(ListenerStop, StopsWhileAClientHasSentHalfARequest) {
  expect_quick_stop("GET / HTTP/1.1\r\nHost: te");
}

}  // namespace
}  // namespace pgjobd
