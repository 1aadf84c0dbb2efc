#include "support/silent_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "support/daemon_process.hpp"

namespace pgjobd::testing {
namespace {

// A connected socket from `source` to 127.0.0.1:port, or -1.
int connect_from(int port, const std::string& source) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (!source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0) {
      close(fd);
      return -1;
    }
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& text) {
  return send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// Reads until the peer closes or `deadline` (polling at least once); true when it closed.
bool read_until_closed(int fd, std::chrono::steady_clock::time_point deadline,
                       std::string* received = nullptr) {
  char buffer[4096];
  while (true) {
    const auto left = std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 deadline - std::chrono::steady_clock::now())
                                                 .count());
    pollfd wait{fd, POLLIN, 0};
    if (poll(&wait, 1, static_cast<int>(left)) > 0) {
      const ssize_t got = recv(fd, buffer, sizeof buffer, 0);
      if (got <= 0) return true;
      if (received != nullptr) received->append(buffer, static_cast<std::size_t>(got));
    } else if (left == 0) {
      return false;
    }
  }
}

}  // namespace

SilentClient::SilentClient(int port, const std::string& text, const std::string& source)
    : fd_(connect_from(port, source)) {
  connected_ = fd_ >= 0;
  if (connected_ && !text.empty()) connected_ = send_all(fd_, text);
}

SilentClient::~SilentClient() {
  if (fd_ >= 0) close(fd_);
}

bool SilentClient::closed_within(std::chrono::milliseconds timeout) {
  return fd_ >= 0 && read_until_closed(fd_, std::chrono::steady_clock::now() + timeout);
}

bool SilentClient::send_more(const std::string& text) { return fd_ >= 0 && send_all(fd_, text); }

TricklingClients::TricklingClients(int port, int count, int addresses,
                                   std::chrono::milliseconds interval,
                                   std::chrono::seconds max_run) {
  const auto end = std::chrono::steady_clock::now() + max_run;
  for (int i = 0; i < count; ++i) {
    const std::string source = "127.0.0." + std::to_string(2 + i % addresses);
    threads_.emplace_back([this, port, source, interval, end] {
      while (!stop_ && std::chrono::steady_clock::now() < end) {
        const int fd = connect_from(port, source);
        if (fd < 0) {
          std::this_thread::sleep_for(interval);
          continue;
        }
        ++opened_;
        bool open = send_all(fd, "GET /healthz HTTP/1.1\r\nX-Slow: ");
        if (open) ++open_;
        while (open && !stop_ && std::chrono::steady_clock::now() < end) {
          std::this_thread::sleep_for(interval);
          open = send_all(fd, "a");
          if (!open) --open_;
        }
        if (open) --open_;
        close(fd);
      }
    });
  }
}

TricklingClients::~TricklingClients() {
  stop_ = true;
  for (auto& thread : threads_) thread.join();
}

TimedProbes probe_timed(int port, const std::string& path, int count,
                        std::chrono::milliseconds spacing, std::chrono::milliseconds within) {
  TimedProbes probes;
  probes.count = count;
  for (int i = 0; i < count; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const HttpResponse response = http_get(port, path);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    probes.slowest = std::max(probes.slowest, took);
    if (response.status == 200 && took <= within) ++probes.within;
    if (took < spacing) std::this_thread::sleep_for(spacing - took);
  }
  return probes;
}

std::string raw_exchange(int port, const std::string& request, std::chrono::milliseconds timeout) {
  std::string received;
  const int fd = connect_from(port, "");
  if (fd < 0) return received;
  if (send_all(fd, request)) {
    read_until_closed(fd, std::chrono::steady_clock::now() + timeout, &received);
  }
  close(fd);
  return received;
}

}  // namespace pgjobd::testing
