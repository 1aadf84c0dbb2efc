// Implements SystemdNotifier: sd_notify(3) datagrams over AF_UNIX and the watchdog thread.

#include "systemd/sd_notify.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <system_error>

namespace pgjobd {
namespace {

// A send that cannot complete in this time (systemd's queue full and not draining) is
// dropped: a lost notification is better than a daemon hung in sendto.
constexpr timeval kSendTimeout = {2, 0};

std::string errno_text(int error_number) {
  return std::error_code(error_number, std::generic_category()).message();
}

// NOTIFY_SOCKET as sun_path bytes, or nullopt when it is not an address we can use.
std::optional<std::string> parse_notify_socket(const char* value) {
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  std::string address(value);
  if (address[0] == '@') {
    address[0] = '\0';  // abstract namespace: the exact length matters, no trailing NUL
  } else if (address[0] != '/') {
    return std::nullopt;  // relative paths and vsock:… are not supported
  }
  // A path needs room for its terminating NUL; an abstract name does not.
  const std::size_t limit = sizeof(sockaddr_un::sun_path) - (address[0] == '\0' ? 0 : 1);
  if (address.size() < 2 || address.size() > limit) return std::nullopt;
  return address;
}

// A positive decimal integer with nothing after it, or nullopt.
std::optional<unsigned long long> parse_positive(const char* value) {
  if (value == nullptr || value[0] < '0' || value[0] > '9') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long number = std::strtoull(value, &end, 10);
  if (errno != 0 || *end != '\0' || number == 0) return std::nullopt;
  return number;
}

// The watchdog ping period from WATCHDOG_USEC / WATCHDOG_PID, as sd_watchdog_enabled(3)
// decides it; 0 when disabled.
std::chrono::microseconds watchdog_interval_from_environment() {
  const char* usec_text = std::getenv("WATCHDOG_USEC");
  if (usec_text == nullptr) return std::chrono::microseconds(0);
  const auto usec = parse_positive(usec_text);
  if (!usec || *usec > static_cast<unsigned long long>(INT64_MAX)) {
    spdlog::warn("systemd: ignoring invalid WATCHDOG_USEC={}", usec_text);
    return std::chrono::microseconds(0);
  }
  if (const char* pid_text = std::getenv("WATCHDOG_PID"); pid_text != nullptr) {
    const auto pid = parse_positive(pid_text);
    if (!pid) {
      spdlog::warn("systemd: ignoring the watchdog: invalid WATCHDOG_PID={}", pid_text);
      return std::chrono::microseconds(0);
    }
    if (*pid != static_cast<unsigned long long>(::getpid())) {
      spdlog::debug("systemd: the watchdog is for pid {}, not this process", pid_text);
      return std::chrono::microseconds(0);
    }
  }
  const auto interval = static_cast<std::int64_t>(*usec / 2);
  return std::chrono::microseconds(interval > 0 ? interval : 1);
}

// The length of the UTF-8 character at text[i] if it is one systemd's utf8_is_valid accepts
// (shortest form, not a surrogate, ≤ U+10FFFF, not a noncharacter), else 0.
// Stricter than text/utf8.cpp on purpose: systemd also refuses noncharacters (U+FDD0..
// U+FDEF, U+xFFFE/U+xFFFF) in STATUS=, and drops the whole message if one slips through.
std::size_t valid_utf8_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  char32_t code = 0;
  char32_t smallest = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2;
    code = lead & 0x1F;
    smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3;
    code = lead & 0x0F;
    smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4;
    code = lead & 0x07;
    smallest = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  const bool valid = code >= smallest && code < 0x110000 && (code & 0xFFFFF800) != 0xD800 &&
                     !(code >= 0xFDD0 && code <= 0xFDEF) && (code & 0xFFFE) != 0xFFFE;
  return valid ? length : 0;
}

std::chrono::microseconds monotonic_now() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::duration_cast<std::chrono::microseconds>(
                                                std::chrono::nanoseconds(now.tv_nsec));
}

}  // namespace

SystemdNotifier::SystemdNotifier() {
  const char* notify_socket = std::getenv("NOTIFY_SOCKET");
  if (notify_socket == nullptr || notify_socket[0] == '\0') return;  // empty = unset
  const auto address = parse_notify_socket(notify_socket);
  if (!address) {
    spdlog::warn(
        "systemd: ignoring NOTIFY_SOCKET={}: not an absolute path or @abstract name that fits "
        "a unix socket address",
        notify_socket);
    return;
  }
  address_ = *address;
  watchdog_interval_ = watchdog_interval_from_environment();
}

SystemdNotifier::~SystemdNotifier() { stop_watchdog(); }

bool SystemdNotifier::enabled() const { return !address_.empty(); }

void SystemdNotifier::ready(const std::string& status) {
  send("READY=1\nSTATUS=" + sanitize_value(status) + "\nMAINPID=" + std::to_string(::getpid()));
}

void SystemdNotifier::status(const std::string& status) {
  send("STATUS=" + sanitize_value(status));
}

void SystemdNotifier::reloading(const std::string& status) {
  send("RELOADING=1\nSTATUS=" + sanitize_value(status) +
       "\nMONOTONIC_USEC=" + std::to_string(monotonic_now().count()));
}

void SystemdNotifier::stopping(const std::string& status) {
  send("STOPPING=1\nSTATUS=" + sanitize_value(status));
}

void SystemdNotifier::extend_timeout(std::chrono::microseconds extra) {
  send("EXTEND_TIMEOUT_USEC=" + std::to_string(extra.count() > 0 ? extra.count() : 0));
}

std::chrono::microseconds SystemdNotifier::watchdog_interval() const { return watchdog_interval_; }

void SystemdNotifier::start_watchdog(std::function<bool()> healthy) {
  if (watchdog_interval_.count() == 0 || !healthy) return;
  std::lock_guard lifecycle(lifecycle_mutex_);
  watchdog_.reset();  // stops a previous one
  watchdog_ = std::make_unique<ServiceThread>();
  // The thread must not take process signals meant for the daemon's sigwait thread, even
  // when started before the daemon blocks them: create it with every signal blocked.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  try {
    watchdog_->start([this, check = std::move(healthy)](const std::stop_token& stop) {
      watchdog_loop(stop, check);
    });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  spdlog::debug("systemd: watchdog pings every {} ms", watchdog_interval_.count() / 1000);
}

void SystemdNotifier::stop_watchdog() {
  std::lock_guard lifecycle(lifecycle_mutex_);
  watchdog_.reset();  // requests the stop and joins
}

void SystemdNotifier::watchdog_loop(const std::stop_token& stop,
                                    const std::function<bool()>& healthy) {
  bool was_healthy = true;
  std::mutex mutex;
  std::condition_variable_any wake;  // nothing notifies it: the stop token ends its waits
  while (!stop.stop_requested()) {
    const auto next = std::chrono::steady_clock::now() + watchdog_interval_;
    bool is_healthy = false;
    try {
      is_healthy = healthy();
    } catch (const std::exception& e) {
      spdlog::warn("systemd: watchdog health check threw: {}", e.what());
    } catch (...) {
      spdlog::warn("systemd: watchdog health check threw");
    }
    if (is_healthy) {
      send("WATCHDOG=1");
      if (!was_healthy) spdlog::info("systemd: healthy again; watchdog pings resumed");
    } else if (was_healthy) {
      spdlog::warn(
          "systemd: unhealthy; not pinging the watchdog (systemd restarts the daemon "
          "if this lasts for WatchdogSec)");
    }
    was_healthy = is_healthy;
    std::unique_lock lock(mutex);
    wake.wait_until(lock, stop, next, [] { return false; });
  }
}

void SystemdNotifier::unset_environment() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): documented to run before any other thread starts
  for (const char* name : {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}) ::unsetenv(name);
}

std::string SystemdNotifier::sanitize_value(std::string_view value) {
  std::string clean;
  clean.reserve(value.size() < kMaxValueBytes ? value.size() : kMaxValueBytes);
  std::size_t i = 0;
  while (i < value.size()) {
    const std::size_t length = valid_utf8_length(value, i);
    if (clean.size() + (length == 0 ? 1 : length) > kMaxValueBytes) break;
    if (length == 0) {
      clean += '?';
      ++i;
      continue;
    }
    const char c = value[i];
    // systemd splits a message at \n and \r and rejects one containing NUL.
    if (length == 1 && (c == '\n' || c == '\r' || c == '\0')) {
      clean += ' ';
    } else {
      clean.append(value.substr(i, length));
    }
    i += length;
  }
  return clean;
}

bool SystemdNotifier::send(const std::string& message) const {
  if (address_.empty()) return false;
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    spdlog::debug("systemd: notify socket: {}", errno_text(errno));
    return false;
  }
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &kSendTimeout, sizeof(kSendTimeout));

  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, address_.data(), address_.size());
  // Abstract names are exactly address_.size() bytes; a path carries its NUL.
  const std::size_t path_length = address_.size() + (address_[0] == '\0' ? 0 : 1);
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path_length);

  ssize_t sent = -1;
  do {
    sent = ::sendto(fd, message.data(), message.size(), MSG_NOSIGNAL,
                    reinterpret_cast<const sockaddr*>(&address), length);
  } while (sent < 0 && errno == EINTR);
  const int error_number = errno;
  ::close(fd);
  if (sent < 0) {
    spdlog::debug("systemd: sending {:?} failed: {}", message, errno_text(error_number));
    return false;
  }
  return true;
}

}  // namespace pgjobd
