#pragma once
// Tells systemd about the daemon's state and pings its watchdog: what to say and when is
// ours, libsystemd's sd_notify(3) speaks the protocol.
//
//   SystemdNotifier notifier;             // reads NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID
//   ...connect, start...
//   notifier.ready("claiming from 2 queues");
//   notifier.start_watchdog([&] { return engine_made_progress_recently(); });
//   ...SIGTERM...
//   notifier.stopping("draining 3 running jobs");
//
// Every call is a no-op when NOTIFY_SOCKET is unset (not started by systemd), and a failed
// send is logged at debug and otherwise ignored: the daemon never fails because systemd went
// away. All members are thread-safe.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/service.hpp"

namespace pgjobd {

class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from the environment and leaves
  // them there: libsystemd reads NOTIFY_SOCKET again at every send, so the daemon must not
  // unset it (exec handlers' children never get these: handlers/exec_environment.cpp).
  SystemdNotifier();
  ~SystemdNotifier();  // stops the watchdog thread
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  // NOTIFY_SOCKET was set to a usable address: an absolute path, or "@name" for an abstract
  // socket. Any other value is logged as a warning and leaves the notifier disabled.
  bool enabled() const;

  // "READY=1\nSTATUS=<status>\nMAINPID=<pid>": start-up is complete (Type=notify). Also ends
  // a reload announced with reloading(): systemd stays in "reloading" until READY=1 arrives.
  void ready(const std::string& status);
  // "STATUS=<status>": the free-form line `systemctl status` shows.
  void status(const std::string& status);
  // "RELOADING=1\nSTATUS=<status>\nMONOTONIC_USEC=<CLOCK_MONOTONIC in µs>". Call ready()
  // when the reload is done (or abandoned).
  void reloading(const std::string& status);
  // "STOPPING=1\nSTATUS=<status>": the daemon has begun shutting down.
  void stopping(const std::string& status);
  // "EXTEND_TIMEOUT_USEC=<µs>": asks systemd to wait this much longer than now before it
  // times out the current start, reload or stop (e.g. while a long drain makes progress).
  void extend_timeout(std::chrono::microseconds extra);

  // When WATCHDOG_USEC is set (and WATCHDOG_PID is unset or our pid), starts a thread that
  // sends "WATCHDOG=1" at once and then every WATCHDOG_USEC/2 while healthy() returns true;
  // a wedged daemon stops pinging and systemd kills and restarts it. healthy() runs on that
  // thread and must not block; an exception counts as unhealthy. Calling it again replaces
  // the callback. No-op when the watchdog is disabled.
  //
  // systemd arms the watchdog once start-up completes, so call this after ready(); keep it
  // running through the drain (a missed ping during a long drain gets the daemon killed
  // with SIGABRT by default).
  void start_watchdog(std::function<bool()> healthy);
  // Stops the watchdog thread, if any; returns promptly. The destructor calls it.
  void stop_watchdog();
  // The ping period, WATCHDOG_USEC/2; 0 when the watchdog is disabled.
  std::chrono::microseconds watchdog_interval() const;

  // Longest value sent for STATUS=, in bytes (cut at a UTF-8 character boundary), so that a
  // message stays well below the 4 KiB systemd accepts.
  static constexpr std::size_t kMaxValueBytes = 2048;

  // A value made safe for one KEY=VALUE line: newlines and NULs become spaces, bytes that
  // are not valid UTF-8 (systemd drops a STATUS that is not) become '?', and it is cut to
  // kMaxValueBytes. Exposed for tests.
  static std::string sanitize_value(std::string_view value);

 private:
  // Sends one datagram; false (logged at debug) on any error or when disabled. libsystemd's
  // send has no timeout: it blocks while systemd's queue is full (systemd not reading);
  // after SIGTERM the daemon's exit bound (README "Signals") still ends it.
  bool send(const std::string& message) const;
  void watchdog_loop(const std::stop_token& stop, const std::function<bool()>& healthy);

  bool enabled_ = false;
  std::chrono::microseconds watchdog_interval_{0};

  std::mutex lifecycle_mutex_;               // serialises start_watchdog / stop_watchdog
  std::unique_ptr<ServiceThread> watchdog_;  // a new one per start_watchdog()
};

// The watchdog for one scope: start_watchdog() now, stop_watchdog() when the scope ends,
// by return or by exception. Declare it after what healthy() reads (the engine), so its
// thread is joined before that is destroyed.
class ScopedWatchdog {
 public:
  ScopedWatchdog(SystemdNotifier& notifier, std::function<bool()> healthy) : notifier_(notifier) {
    notifier_.start_watchdog(std::move(healthy));
  }
  ~ScopedWatchdog() { notifier_.stop_watchdog(); }
  ScopedWatchdog(const ScopedWatchdog&) = delete;
  ScopedWatchdog& operator=(const ScopedWatchdog&) = delete;

 private:
  SystemdNotifier& notifier_;
};

}  // namespace pgjobd
