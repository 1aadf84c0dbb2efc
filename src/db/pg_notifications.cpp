// PgNotifications: a libpqxx notification receiver filtered on the schema.

#include "db/pg_notifications.hpp"

#include <pqxx/pqxx>

#include "db/pqxx_errors.hpp"

namespace pgjobd {

class PgNotifications::Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& conn, PgNotifications& owner)
      : pqxx::notification_receiver(conn, kNotifyChannel), owner_(owner) {}
  void operator()(const std::string& payload, int /*backend_pid*/) override {
    // The payload is the schema of the table that got rows; daemons of other schemas in
    // the same database ignore it.
    if ((payload.empty() || payload == owner_.schema_) && owner_.on_notify_ != nullptr) {
      (*owner_.on_notify_)();
    }
  }

 private:
  PgNotifications& owner_;
};

PgNotifications::PgNotifications(const DatabaseConfig& config) : schema_(config.schema) {
  try {
    conn_ = open_connection(config, "listener");
    receiver_ = std::make_unique<Receiver>(*conn_, *this);
    // add_receiver swallows a broken connection during LISTEN: check it took.
    if (!conn_->is_open()) throw pqxx::broken_connection("connection closed during LISTEN");
  } catch (...) {
    receiver_.reset();
    conn_.reset();
    rethrow_as_db_error("listen");
  }
}

PgNotifications::~PgNotifications() {
  receiver_.reset();  // before its connection
}

int PgNotifications::socket() const { return conn_->sock(); }

void PgNotifications::consume(const std::function<void()>& on_notify) {
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
