#pragma once
// LISTENs on the jobs channel with a connection of its own and wakes the fetcher when
// the INSERT trigger notifies. Reconnects by itself (capped backoff) and wakes the
// fetcher after every reconnect, since notifications sent meanwhile were lost.

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "db/connection.hpp"
#include "engine/health.hpp"
#include "metrics/metrics.hpp"
#include "pgjobd/config.hpp"

namespace pgjobd {

inline constexpr const char* kNotifyChannel = "pgjobd_jobs";

class NotifyListener {
 public:
  // on_notify runs on the listener thread for each notification for `config.schema`.
  NotifyListener(DatabaseConfig config, std::function<void()> on_notify, Metrics& metrics);
  ~NotifyListener();  // stops
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  void stop();  // safe twice
  bool listening() const { return listening_.load(); }

 private:
  void run();
  void listen_until_error(ReconnectBackoff& backoff);

  const DatabaseConfig config_;
  const std::function<void()> on_notify_;
  Metrics& metrics_;
  int stop_fd_;  // eventfd: makes the poll() in run() return at once on stop
  std::atomic<bool> stopping_{false};
  std::atomic<bool> listening_{false};
  std::thread thread_;  // last
};

}  // namespace pgjobd
