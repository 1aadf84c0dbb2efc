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

class SilentServer {
 public:
  SilentServer() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(fd_, 256) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      if (fd_ >= 0) close(fd_);
      throw std::runtime_error("cannot start the silent server");
    }
    port_ = ntohs(address.sin_port);
  }
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;
  ~SilentServer() { close(fd_); }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/job"; }

 private:
  int fd_;
  int port_ = 0;
};

}  // namespace pgjobd::testing
