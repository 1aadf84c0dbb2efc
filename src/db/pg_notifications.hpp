#pragma once
// Notifications over a LISTEN session of its own on pgjobd's channels.

#include <memory>

#include "db/db_session.hpp"
#include "pgjobd/config.hpp"
#include "store/database.hpp"

namespace pgjobd {

// The INSERT trigger, pgjobd_pause_queue and pgjobd_resume_queue notify here.
inline constexpr const char* kNotifyChannel = "pgjobd_jobs";
// pgjobd_cancel notifies here when it marks a running job.
inline constexpr const char* kCancelChannel = "pgjobd_cancel";
// pgjobd_limits_sync notifies here when it changed a limit.
inline constexpr const char* kLimitsChannel = "pgjobd_limits";

class PgNotifications final : public Notifications {
 public:
  // Connects and LISTENs. Throws DbError.
  explicit PgNotifications(const DatabaseConfig& config);
  ~PgNotifications() override;
  PgNotifications(const PgNotifications&) = delete;
  PgNotifications& operator=(const PgNotifications&) = delete;

  int socket() const override;
  void consume(const std::function<void(NotifyChannel, int)>& on_notify) override;

 private:
  class Receiver;
  const std::string schema_;
  DbSession session_;
  std::unique_ptr<Receiver> jobs_receiver_;
  std::unique_ptr<Receiver> cancel_receiver_;
  std::unique_ptr<Receiver> limits_receiver_;
  const std::function<void(NotifyChannel, int)>* on_notify_ = nullptr;  // set only inside consume()
};

}  // namespace pgjobd
