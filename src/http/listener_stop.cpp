#include "http/listener_stop.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "http/listen_address.hpp"

namespace pgjobd {
namespace {

void knock(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  // Non-blocking: an address of this host completes the handshake within connect(), and
  // whatever else happens (a firewall dropping the SYN) must not hold up the stop.
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        found->ai_protocol);
  if (fd >= 0) {
    (void)connect(fd, found->ai_addr, found->ai_addrlen);
    close(fd);
  }
  freeaddrinfo(found);
}

}  // namespace

std::string knock_address(const std::string& listen) {
  std::string host = listen_host(listen);
  if (host.empty() || host == "0.0.0.0" || host == "localhost") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

void stop_with_knocks(const std::string& host, int port, const std::function<void()>& stop) {
  std::promise<void> stopped;
  std::future<void> done = stopped.get_future();
  std::thread stopper([&stop, &stopped] {
    stop();
    stopped.set_value();
  });
  while (done.wait_for(std::chrono::milliseconds(10)) == std::future_status::timeout) {
    knock(host, port);
  }
  stopper.join();
}

}  // namespace pgjobd
