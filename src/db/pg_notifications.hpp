#pragma once
// Notifications over a LISTEN session of its own on the jobs channel.

#include <memory>

#include "db/connection.hpp"
#include "pgjobd/config.hpp"
#include "store/database.hpp"

namespace pgjobd {

inline constexpr const char* kNotifyChannel = "pgjobd_jobs";

class PgNotifications final : public Notifications {
 public:
  // Connects and LISTENs. Throws DbError.
  explicit PgNotifications(const DatabaseConfig& config);
  ~PgNotifications() override;
  PgNotifications(const PgNotifications&) = delete;
  PgNotifications& operator=(const PgNotifications&) = delete;

  int socket() const override;
  void consume(const std::function<void()>& on_notify) override;

 private:
  class Receiver;
  const std::string schema_;
  ConnectionPtr conn_;
  std::unique_ptr<Receiver> receiver_;
  const std::function<void()>* on_notify_ = nullptr;  // set only inside consume()
};

}  // namespace pgjobd
