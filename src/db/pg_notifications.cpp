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
  void operator()(const std::string& payload, int backend_pid) override {
    // The payload is the schema of the table concerned; daemons of other schemas in the
    // same database ignore it.
    if ((payload.empty() || payload == owner_.schema_) && owner_.on_notify_ != nullptr) {
      (*owner_.on_notify_)(kind_, backend_pid);
    }
  }

 private:
  PgNotifications& owner_;
  const NotifyChannel kind_;
};

namespace {

// LISTEN holds a session: past a transaction pooler when database.listen_url says where.
DatabaseConfig listen_session(const DatabaseConfig& config) {
  DatabaseConfig session = config;
  if (!config.listen_url.empty()) {
    session.url = config.listen_url;
    session.pooler = "none";
  }
  return session;
}

}  // namespace

PgNotifications::PgNotifications(const DatabaseConfig& config)
    : schema_(config.schema), session_(listen_session(config), "listener") {
  session_.connect("listen");
  // The three LISTENs under the call deadline, like every other call: a server that
  // stopped answering must not hold the listener (and its reconnects) forever. Armed here
  // rather than by call(): add_receiver swallows the broken connection a deadline leaves,
  // so the deadline's expiry is seen only through it.
  session_.call("listen", Millis(0), [&] {
    pqxx::connection_base& conn = session_.connection();
    try {
      const Millis bound = session_.config().call_timeout;
      const CallDeadline deadline(conn, bound);
      jobs_receiver_ =
          std::make_unique<Receiver>(conn, *this, kNotifyChannel, NotifyChannel::kJobs);
      cancel_receiver_ =
          std::make_unique<Receiver>(conn, *this, kCancelChannel, NotifyChannel::kCancel);
      limits_receiver_ =
          std::make_unique<Receiver>(conn, *this, kLimitsChannel, NotifyChannel::kLimits);
      // add_receiver swallows a broken connection during LISTEN: check it took.
      if (!conn.is_open() || deadline.expired()) {
        throw pqxx::broken_connection(deadline.expired()
                                          ? "no answer to LISTEN within " + format_duration(bound)
                                          : "connection closed during LISTEN");
      }
    } catch (...) {
      limits_receiver_.reset();  // before their connection, which call() drops
      cancel_receiver_.reset();
      jobs_receiver_.reset();
      throw;
    }
    return 0;
  });
}

PgNotifications::~PgNotifications() {
  // Each receiver sends its UNLISTEN as it goes: against a server that stopped answering
  // that waited forever, and held a drain with it. libpqxx reports the failure of an
  // UNLISTEN the deadline cut as a notice, not an exception.
  std::optional<CallDeadline> deadline;
  if (session_.connected()) deadline.emplace(session_.connection(), session_.config().call_timeout);
  limits_receiver_.reset();  // before their connection
  cancel_receiver_.reset();
  jobs_receiver_.reset();
}

int PgNotifications::socket() const { return session_.socket(); }

void PgNotifications::consume(const std::function<void(NotifyChannel, int)>& on_notify) {
  on_notify_ = &on_notify;
  // Not through call(), which drops the connection on an error: the receivers hold it, so
  // it goes with them (the listener replaces this object after an error).
  try {
    session_.connection().get_notifs();  // runs Receiver for each notification
  } catch (...) {
    on_notify_ = nullptr;
    rethrow_as_db_error("listen");
  }
  on_notify_ = nullptr;
}

}  // namespace pgjobd
