#pragma once
// A stand-in for systemd's notify socket: a bound AF_UNIX datagram socket that records what
// SystemdNotifier sends, and the environment that points the notifier at it. Shared by the
// notifier's own tests and the engine's watchdog test.

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace pgjobd::testing {

// Sets (or, for nullopt, unsets) environment variables and restores them on destruction.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, std::optional<std::string>>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      set(name, value);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) set(name.c_str(), value);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  static void set(const char* name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// What systemd would receive: one datagram and the sender pid the kernel attached to it.
struct Datagram {
  std::string text;
  pid_t sender = 0;
};

// A bound AF_UNIX SOCK_DGRAM socket playing systemd's notify socket.
class NotifySink {
 public:
  enum class Kind { kPath, kAbstract };

  explicit NotifySink(Kind kind) {
    static std::atomic<int> counter{0};
    const std::string unique = std::to_string(::getpid()) + "-" + std::to_string(counter++);
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    const int on = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));

    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    socklen_t length = 0;
    if (kind == Kind::kPath) {
      directory_ = std::filesystem::temp_directory_path() / ("pgjobd-sdn-" + unique);
      std::filesystem::create_directories(directory_);
      const std::string path = (directory_ / "notify").string();
      std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
      length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
      notify_socket_ = path;
    } else {
      const std::string name = "pgjobd-sdn-test-" + unique;
      address.sun_path[0] = '\0';
      std::memcpy(address.sun_path + 1, name.data(), name.size());
      length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
      notify_socket_ = "@" + name;
    }
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
      throw std::runtime_error("bind failed: " + std::string(std::strerror(errno)));
    }
  }
  ~NotifySink() {
    ::close(fd_);
    if (!directory_.empty()) std::filesystem::remove_all(directory_);
  }
  NotifySink(const NotifySink&) = delete;
  NotifySink& operator=(const NotifySink&) = delete;

  // The NOTIFY_SOCKET value naming this socket.
  const std::string& notify_socket() const { return notify_socket_; }

  // The next datagram, or nullopt when none arrives within `timeout`.
  std::optional<Datagram> receive(
      std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
    if (ready <= 0) return std::nullopt;
    char buffer[8192];
    iovec iov{buffer, sizeof(buffer)};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd_, &message, MSG_DONTWAIT);
    if (n < 0) return std::nullopt;
    Datagram datagram{std::string(buffer, static_cast<std::size_t>(n)), 0};
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred credentials{};
        std::memcpy(&credentials, CMSG_DATA(c), sizeof(credentials));
        datagram.sender = credentials.pid;
      }
    }
    return datagram;
  }

  // The next datagram's text, or "<nothing>" after the timeout.
  std::string receive_text(std::chrono::milliseconds timeout = std::chrono::milliseconds(2000)) {
    const auto datagram = receive(timeout);
    return datagram ? datagram->text : "<nothing>";
  }

  // Discards datagrams already queued.
  void drain() {
    while (receive(std::chrono::milliseconds(0))) {
    }
  }

 private:
  int fd_ = -1;
  std::filesystem::path directory_;
  std::string notify_socket_;
};

}  // namespace pgjobd::testing
