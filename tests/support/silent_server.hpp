#pragma once
// An HTTP peer that never answers: a loopback socket that listens and never accepts. The
// kernel completes the handshakes (up to its backlog), so a client connects and sends its
// request, and nothing ever reads it or answers.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace pgjobd::testing {

// A TCP socket listening on 127.0.0.1 at a port the kernel picked, written to `port`.
inline int listen_on_loopback(int backlog, int& port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot listen on a loopback port");
  }
  port = ntohs(address.sin_port);
  return fd;
}

class SilentServer {
 public:
  SilentServer() : fd_(listen_on_loopback(256, port_)) {}
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;
  ~SilentServer() { close(fd_); }

  std::string url(const std::string& host = "127.0.0.1") const {
    return "http://" + host + ":" + std::to_string(port_) + "/job";
  }

 private:
  int port_ = 0;  // before fd_, which sets it
  int fd_;
};

}  // namespace pgjobd::testing
