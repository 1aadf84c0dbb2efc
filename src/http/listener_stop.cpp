#include "http/listener_stop.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <system_error>
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

// The local port of socket `fd`, or -1 when it is no TCP/IP socket.
int local_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return -1;
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return -1;
}

// Ends the reading side of every connection this process accepted on `port`: a civetweb
// worker waiting for a request on one (a browser's idle or preconnected socket, a scraper's
// kept-alive one) sees its end at once and goes back to notice the stop. The listening
// socket has no peer and is left alone; so are this process's own client sockets, whose local port
// is not `port`. A descriptor closed meanwhile fails the checks or the shutdown, harmlessly.
void end_accepted_reads(int port) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    struct stat status {};
    if (fstat(fd, &status) != 0 || !S_ISSOCK(status.st_mode) || local_port(fd) != port) continue;
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) continue;
    (void)shutdown(fd, SHUT_RD);
  }
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
    end_accepted_reads(port);
  }
  stopper.join();
}

}  // namespace pgjobd
