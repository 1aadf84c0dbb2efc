#pragma once
// LISTENs on pgjobd's channels (a Notifications session of its own): wakes the fetcher when
// the INSERT trigger notifies, and has running jobs heartbeated when pgjobd_cancel does.
// Reconnects by itself (capped backoff) and does both after every reconnect, since
// notifications sent meanwhile were lost.

#include <functional>

#include "metrics/metrics.hpp"
#include "runtime/service.hpp"
#include "store/database.hpp"

namespace pgjobd {

class NotifyListener final : public Service {
 public:
  // Run on the listener thread for each notification for this schema, by channel; on_jobs
  // with the server process that sent it (0: not known, as after a reconnect).
  NotifyListener(Database& database, std::function<void(int sender_pid)> on_jobs,
                 std::function<void()> on_cancel, Metrics& metrics,
                 std::function<void()> on_limits = {});
  ~NotifyListener() override;  // stop()
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  void start() override;
  void request_stop() override;
  void join() override;

 private:
  void run(const std::stop_token& stop);
  // Throws DbError when the session fails.
  void listen_until_stopped(const std::stop_token& stop, Notifications& session);
  // Waits for the stop eventfd or `wait`; true when stopping.
  bool wait_or_stop(std::chrono::milliseconds wait) const;

  Database& database_;
  const std::function<void(NotifyChannel, int)> on_notify_;
  Metrics& metrics_;
  int stop_fd_;           // eventfd: makes the poll() in the loop return at once on stop
  ServiceThread thread_;  // last
};

}  // namespace pgjobd
