// NotifyListener: LISTEN, poll the socket together with a stop eventfd, reconnect.

#include "engine/notify_listener.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <pqxx/pqxx>

#include <cstring>

#include <spdlog/spdlog.h>

#include "db/connection.hpp"

namespace pgjobd {
namespace {

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& conn, const std::string& schema, const std::function<void()>& fn)
      : pqxx::notification_receiver(conn, kNotifyChannel), schema_(schema), fn_(fn) {}
  void operator()(const std::string& payload, int /*backend_pid*/) override {
    // The payload is the schema of the table that got rows; daemons of other schemas in
    // the same database ignore it.
    if (payload.empty() || payload == schema_) fn_();
  }

 private:
  const std::string& schema_;
  const std::function<void()>& fn_;
};

}  // namespace

NotifyListener::NotifyListener(DatabaseConfig config, std::function<void()> on_notify,
                               Metrics& metrics)
    : config_(std::move(config)),
      on_notify_(std::move(on_notify)),
      metrics_(metrics),
      stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      thread_([this] { run(); }) {}

NotifyListener::~NotifyListener() {
  stop();
  close(stop_fd_);
}

void NotifyListener::stop() {
  stopping_ = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] auto n = write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void NotifyListener::run() {
  ReconnectBackoff backoff;
  while (!stopping_) {
    try {
      listen_until_error(backoff);
      return;  // stopped
    } catch (const pqxx::failure& e) {
      listening_ = false;
      metrics_.db_error("listen");
      const auto wait = backoff.next();
      spdlog::warn("LISTEN connection failed, reconnecting in {}ms: {}", wait.count(), e.what());
      pollfd stop_poll{stop_fd_, POLLIN, 0};
      poll(&stop_poll, 1, static_cast<int>(wait.count()));
    }
  }
}

void NotifyListener::listen_until_error(ReconnectBackoff& backoff) {
  auto conn = open_connection(config_, "listener");
  Receiver receiver(*conn, config_.schema, on_notify_);
  listening_ = true;
  backoff.reset();
  spdlog::debug("listening on channel {}", kNotifyChannel);
  on_notify_();  // anything inserted while we were not listening
  while (!stopping_) {
    pollfd fds[2] = {{conn->sock(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      throw pqxx::broken_connection(std::string("poll: ") + std::strerror(errno));
    }
    if (fds[1].revents) break;
    if (fds[0].revents) conn->get_notifs();  // runs Receiver for each notification
  }
  listening_ = false;
}

}  // namespace pgjobd
