// NotifyListener: poll the LISTEN session together with a stop eventfd; reconnect.

#include "engine/notify_listener.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

#include <spdlog/spdlog.h>

#include "engine/loop_error.hpp"
#include "store/reconnect_backoff.hpp"

namespace pgjobd {

NotifyListener::NotifyListener(Database& database, std::function<void(int)> on_jobs,
                               std::function<void()> on_cancel, Metrics& metrics,
                               std::function<void()> on_limits)
    : database_(database),
      on_notify_([on_jobs = std::move(on_jobs), on_cancel = std::move(on_cancel),
                  on_limits = std::move(on_limits)](NotifyChannel channel, int sender_pid) {
        if (channel == NotifyChannel::kJobs) {
          if (on_jobs) on_jobs(sender_pid);
          return;
        }
        const std::function<void()>& callback =
            channel == NotifyChannel::kCancel ? on_cancel : on_limits;
        if (callback) callback();
      }),
      metrics_(metrics),
      stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

NotifyListener::~NotifyListener() {
  stop();
  close(stop_fd_);
}

void NotifyListener::start() {
  thread_.start([this](const std::stop_token& stop) { run(stop); });
}

void NotifyListener::request_stop() {
  thread_.request_stop();
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(stop_fd_, &one, sizeof one);
}

void NotifyListener::join() { thread_.join(); }

bool NotifyListener::wait_or_stop(std::chrono::milliseconds wait) const {
  pollfd stop_poll{stop_fd_, POLLIN, 0};
  return poll(&stop_poll, 1, static_cast<int>(wait.count())) > 0;
}

void NotifyListener::run(const std::stop_token& stop) {
  ReconnectBackoff backoff;
  while (!stop.stop_requested()) {
    try {
      auto session = database_.listen();
      backoff.reset();
      listen_until_stopped(stop, *session);
      return;
    } catch (const std::exception& e) {  // a DbError, or a bug: the session is lost, not the loop
      count_loop_error(&metrics_, "listen", "listen", e);
      const auto wait = backoff.next();
      spdlog::warn("LISTEN connection failed, reconnecting in {}ms: {}", wait.count(), e.what());
      if (wait_or_stop(wait)) return;
    }
  }
}

void NotifyListener::listen_until_stopped(const std::stop_token& stop, Notifications& session) {
  spdlog::debug("listening for new jobs");
  // Anything inserted or cancelled while we were not listening.
  on_notify_(NotifyChannel::kJobs, 0);
  on_notify_(NotifyChannel::kCancel, 0);
  on_notify_(NotifyChannel::kLimits, 0);
  while (!stop.stop_requested()) {
    pollfd fds[2] = {{session.socket(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      throw DbError("listen: poll: " + std::error_code(errno, std::system_category()).message(), "",
                    true);
    }
    if (fds[1].revents) return;
    if (fds[0].revents) session.consume(on_notify_);
  }
}

}  // namespace pgjobd
