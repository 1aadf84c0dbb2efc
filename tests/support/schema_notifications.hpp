#pragma once
// One schema's notifications on a channel every schema of the database shares (pgjobd_jobs,
// pgjobd_cancel: the payload names the schema). Tests run side by side, each in a schema of
// its own, so a listener also hears the others' notifications: only those naming this
// schema are counted.

#include <pqxx/pqxx>

#include <string>

namespace pgjobd::testing {

class SchemaNotifications : public pqxx::notification_receiver {
 public:
  // LISTENs on `conn` (sent with its next statement).
  SchemaNotifications(pqxx::connection_base& conn, const std::string& channel, std::string schema)
      : pqxx::notification_receiver(conn, channel), schema_(std::move(schema)) {}

  void operator()(const std::string& payload, int) override {
    if (payload == schema_) ++count_;
  }

  // Waits up to 10 s for a first notification naming the schema.
  void await_first() {
    for (int i = 0; i < 100 && count_ == 0; ++i) conn().await_notification(0, 100000);
  }

  int count() const { return count_; }
  void reset() { count_ = 0; }

 private:
  std::string schema_;
  int count_ = 0;
};

}  // namespace pgjobd::testing
