#pragma once
// One schema's notifications on a channel every schema of the database shares (pgjobd_jobs,
// pgjobd_cancel: the payload names the schema). Tests run side by side, each in a schema of
// its own, so a listener also hears the others' notifications: only those naming this
// schema are recorded.

#include <pqxx/pqxx>

#include <string>
#include <vector>

namespace pgjobd::testing {

class SchemaNotifications : public pqxx::notification_receiver {
 public:
  // LISTENs on `conn` (sent with its next statement).
  SchemaNotifications(pqxx::connection_base& conn, const std::string& channel, std::string schema)
      : pqxx::notification_receiver(conn, channel), schema_(std::move(schema)) {}

  void operator()(const std::string& payload, int) override {
    if (payload == schema_) payloads.push_back(payload);
  }

  // Waits up to 10 s for a first notification naming the schema.
  void await_first() {
    for (int i = 0; i < 100 && payloads.empty(); ++i) conn().await_notification(0, 100000);
  }

  int count() const { return static_cast<int>(payloads.size()); }

  std::vector<std::string> payloads;

 private:
  std::string schema_;
};

}  // namespace pgjobd::testing
