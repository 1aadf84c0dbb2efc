// Implements SystemdNotifier: the message texts and the watchdog thread; libsystemd's
// sd_notify(3) sends them and sd_watchdog_enabled(3) reads the watchdog's variables.

#include "systemd/sd_notify.hpp"

#include <signal.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <system_error>

#include "text/errno_text.hpp"
#include "text/utf8.hpp"

namespace pgjobd {
namespace {

// NOTIFY_SOCKET names an address we send to: an absolute path that fits a unix socket
// address with its NUL, or an "@name" abstract socket. libsystemd would try others (e.g.
// vsock:…) at every send; deciding once keeps enabled() and the warning truthful.
bool usable_notify_socket(std::string_view value) {
  if (value.size() < 2 || (value[0] != '@' && value[0] != '/')) return false;
  const std::size_t limit = sizeof(sockaddr_un::sun_path) - (value[0] == '@' ? 0 : 1);
  return value.size() <= limit;
}

// The watchdog ping period, WATCHDOG_USEC/2, as sd_watchdog_enabled(3) reads WATCHDOG_USEC
// and WATCHDOG_PID (left in the environment); 0 when disabled.
std::chrono::microseconds watchdog_interval_from_environment() {
  std::uint64_t usec = 0;
  const int enabled = ::sd_watchdog_enabled(/*unset_environment=*/0, &usec);
  if (enabled < 0) {
    const char* usec_text = std::getenv("WATCHDOG_USEC");
    const char* pid_text = std::getenv("WATCHDOG_PID");
    spdlog::warn("systemd: ignoring the watchdog: invalid WATCHDOG_USEC={} or WATCHDOG_PID={}",
                 usec_text != nullptr ? usec_text : "", pid_text != nullptr ? pid_text : "");
    return std::chrono::microseconds(0);
  }
  if (enabled == 0) {
    if (const char* pid_text = std::getenv("WATCHDOG_PID");
        pid_text != nullptr && std::getenv("WATCHDOG_USEC") != nullptr) {
      spdlog::debug("systemd: the watchdog is for pid {}, not this process", pid_text);
    }
    return std::chrono::microseconds(0);
  }
  // usec < 2^64 - 1 (USEC_INFINITY is refused), so half of it fits.
  const auto interval = static_cast<std::int64_t>(usec / 2);
  return std::chrono::microseconds(interval > 0 ? interval : 1);
}

// The length of the UTF-8 character at text[i] if it is one systemd's utf8_is_valid accepts,
// else 0: text/utf8's rule, and no noncharacter, which systemd also refuses in STATUS= (it
// drops the whole message if one slips through).
std::size_t systemd_utf8_length(std::string_view text, std::size_t i) {
  const Utf8Character character = read_utf8_character(text, i);
  return is_unicode_noncharacter(character.code) ? 0 : character.length;
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
  if (!usable_notify_socket(notify_socket)) {
    spdlog::warn(
        "systemd: ignoring NOTIFY_SOCKET={}: not an absolute path or @abstract name that fits "
        "a unix socket address",
        notify_socket);
    return;
  }
  enabled_ = true;
  watchdog_interval_ = watchdog_interval_from_environment();
}

SystemdNotifier::~SystemdNotifier() { stop_watchdog(); }

bool SystemdNotifier::enabled() const { return enabled_; }

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

std::string SystemdNotifier::sanitize_value(std::string_view value) {
  std::string clean;
  clean.reserve(value.size() < kMaxValueBytes ? value.size() : kMaxValueBytes);
  std::size_t i = 0;
  while (i < value.size()) {
    const std::size_t length = systemd_utf8_length(value, i);
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
  if (!enabled_) return false;
  // Reads NOTIFY_SOCKET on every call: the daemon keeps it in its environment (exec
  // handlers' children never get it: handlers/exec_environment.cpp withholds it).
  const int sent = ::sd_notify(/*unset_environment=*/0, message.c_str());
  if (sent <= 0) {
    spdlog::debug("systemd: sending {:?} failed: {}", message,
                  sent < 0 ? errno_text(-sent) : "NOTIFY_SOCKET is no longer set");
    return false;
  }
  return true;
}

}  // namespace pgjobd
