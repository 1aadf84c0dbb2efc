#pragma once
// An in-memory UiStore for the dashboard's unit tests: serves whatever the test put in it,
// records every action (so a test can prove a refused request changed nothing), and throws
// DbError on demand.

#include <mutex>
#include <string>
#include <vector>

#include "ui/ui_store.hpp"

namespace pgjobd::testing {

class FakeUiStore : public ui::UiStore {
 public:
  struct Call {
    std::string action;  // retry, cancel, pause_queue, resume_queue, pause_schedule, ...
    std::vector<std::int64_t> ids;
    std::string target;  // queue or schedule name
    std::string reason;
    ui::Actor actor;
  };

  // What the reads return; set before the server starts or under lock().
  ui::Overview overview_data;
  std::vector<ui::JobDetail> job_data;  // jobs() pages these, newest (highest id) first
  std::vector<ui::QueueInfo> queue_data;
  std::vector<ui::LimitInfo> limit_data;
  std::vector<ui::ScheduleInfo> schedule_data;
  std::vector<ui::AuditEntry> audit_data;
  bool fail = false;  // every method throws DbError

  void ping() override;
  ui::Overview overview() override;
  ui::JobPage jobs(const ui::JobFilter& filter) override;
  std::optional<ui::JobDetail> job(std::int64_t id, bool with_payload) override;
  std::vector<ui::QueueInfo> queues() override;
  std::vector<ui::LimitInfo> limits() override;
  std::vector<ui::ScheduleInfo> schedules() override;
  std::vector<ui::AuditEntry> audit(int limit) override;
  ui::ActionResult retry(const std::vector<std::int64_t>& ids, const ui::Actor& actor) override;
  ui::ActionResult cancel(const std::vector<std::int64_t>& ids, const std::string& reason,
                          const ui::Actor& actor) override;
  ui::ActionResult pause_queue(const std::string& queue, const ui::Actor& actor) override;
  ui::ActionResult resume_queue(const std::string& queue, const ui::Actor& actor) override;
  ui::ActionResult pause_schedule(const std::string& name, const ui::Actor& actor) override;
  ui::ActionResult resume_schedule(const std::string& name, const ui::Actor& actor) override;

  std::vector<Call> calls();             // the actions so far
  std::vector<ui::JobFilter> filters();  // every jobs() filter so far
  std::vector<bool> payload_requests();  // with_payload of every job() call

  // A job with plausible fields.
  static ui::JobDetail make_job(std::int64_t id, const std::string& type,
                                const std::string& status);

 private:
  void maybe_fail();
  ui::ActionResult record(Call call);

  std::mutex mutex_;
  std::vector<Call> calls_;
  std::vector<ui::JobFilter> filters_;
  std::vector<bool> payload_requests_;
};

}  // namespace pgjobd::testing
