// PgNotifications: a libpqxx notification receiver filtered on the schema.

#include "db/pg_notifications.hpp"

#include <optional>
#include <pqxx/pqxx>

#include "db/call_deadline.hpp"
#include "db/pqxx_errors.hpp"

namespace pgjobd {

class PgNotifications::Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& conn, PgNotifications& owner, const char* channel,
           NotifyChannel kind)
      : pqxx::notification_receiver(conn, channel), owner_(owner), kind_(kind) {}
  void operator()(const std::string& payload, int /*backend_pid*/) override {
    // The payload is the schema of the table concerned; daemons of other schemas in the
    // same database ignore it.
    if ((payload.empty() || payload == owner_.schema_) && owner_.on_notify_ != nullptr) {
      (*owner_.on_notify_)(kind_);
    }
  }

 private:
  PgNotifications& owner_;
  const NotifyChannel kind_;
};

PgNotifications::PgNotifications(const DatabaseConfig& config)
    : schema_(config.schema), call_timeout_(config.call_timeout) {
  try {
    // LISTEN holds a session: past a transaction pooler when database.listen_url says where.
    DatabaseConfig session = config;
    if (!config.listen_url.empty()) {
      session.url = config.listen_url;
      session.pooler = "none";
    }
    conn_ = open_connection(session, "listener");
    // The three LISTENs under the call deadline, like every other call: a server that
    // stopped answering must not hold the listener (and its reconnects) forever.
    const CallDeadline deadline(*conn_, config.call_timeout);
    jobs_receiver_ =
        std::make_unique<Receiver>(*conn_, *this, kNotifyChannel, NotifyChannel::kJobs);
    cancel_receiver_ =
        std::make_unique<Receiver>(*conn_, *this, kCancelChannel, NotifyChannel::kCancel);
    limits_receiver_ =
        std::make_unique<Receiver>(*conn_, *this, kLimitsChannel, NotifyChannel::kLimits);
    // add_receiver swallows a broken connection during LISTEN: check it took.
    if (!conn_->is_open() || deadline.expired()) {
      throw pqxx::broken_connection(deadline.expired() ? "no answer to LISTEN within " +
                                                             format_duration(config.call_timeout)
                                                       : "connection closed during LISTEN");
    }
  } catch (...) {
    limits_receiver_.reset();
    cancel_receiver_.reset();
    jobs_receiver_.reset();
    conn_.reset();
    rethrow_as_db_error("listen");
  }
}

PgNotifications::~PgNotifications() {
  // Each receiver sends its UNLISTEN as it goes: against a server that stopped answering
  // that waited forever, and held a drain with it. libpqxx reports the failure of an
  // UNLISTEN the deadline cut as a notice, not an exception.
  std::optional<CallDeadline> deadline;
  if (conn_) deadline.emplace(*conn_, call_timeout_);
  limits_receiver_.reset();  // before their connection
  cancel_receiver_.reset();
  jobs_receiver_.reset();
}

int PgNotifications::socket() const { return conn_->sock(); }

void PgNotifications::consume(const std::function<void(NotifyChannel)>& on_notify) {
  on_notify_ = &on_notify;
  try {
    conn_->get_notifs();  // runs Receiver for each notification
  } catch (...) {
    on_notify_ = nullptr;
    rethrow_as_db_error("listen");
  }
  on_notify_ = nullptr;
}

}  // namespace pgjobd
