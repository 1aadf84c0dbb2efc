// The fake dashboard store: data in, calls recorded.
#include "support/fake_ui_store.hpp"

#include <algorithm>

#include "store/db_error.hpp"

namespace pgjobd::testing {

void FakeUiStore::maybe_fail() {
  if (fail) throw DbError("connection refused (fake)", "", true);
}

void FakeUiStore::ping() { maybe_fail(); }

ui::Overview FakeUiStore::overview() {
  maybe_fail();
  return overview_data;
}

ui::JobPage FakeUiStore::jobs(const ui::JobFilter& filter) {
  maybe_fail();
  {
    std::lock_guard lock(mutex_);
    filters_.push_back(filter);
  }
  std::vector<ui::JobDetail> sorted = job_data;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.summary.id > b.summary.id; });
  ui::JobPage page;
  for (const ui::JobDetail& job : sorted) {
    const ui::JobSummary& s = job.summary;
    if (filter.status && s.status != *filter.status) continue;
    if (filter.queue && s.queue != *filter.queue) continue;
    if (filter.type && s.type != *filter.type) continue;
    if (filter.id && s.id != *filter.id) continue;
    if (filter.before_id && s.id >= *filter.before_id) continue;
    if (static_cast<int>(page.jobs.size()) == filter.limit) {
      page.next_before = page.jobs.back().id;
      break;
    }
    page.jobs.push_back(s);
  }
  return page;
}

std::optional<ui::JobDetail> FakeUiStore::job(std::int64_t id, bool with_payload) {
  maybe_fail();
  {
    std::lock_guard lock(mutex_);
    payload_requests_.push_back(with_payload);
  }
  for (const ui::JobDetail& job : job_data) {
    if (job.summary.id != id) continue;
    ui::JobDetail copy = job;
    if (!with_payload) {
      copy.payload_json.reset();
      copy.result_json.reset();
    }
    return copy;
  }
  return std::nullopt;
}

std::vector<ui::QueueInfo> FakeUiStore::queues() {
  maybe_fail();
  return queue_data;
}

std::vector<ui::LimitInfo> FakeUiStore::limits() {
  maybe_fail();
  return limit_data;
}

std::vector<ui::ScheduleInfo> FakeUiStore::schedules() {
  maybe_fail();
  return schedule_data;
}

std::vector<ui::AuditEntry> FakeUiStore::audit(int limit) {
  maybe_fail();
  std::vector<ui::AuditEntry> entries = audit_data;
  if (static_cast<int>(entries.size()) > limit) entries.resize(static_cast<std::size_t>(limit));
  return entries;
}

ui::ActionResult FakeUiStore::record(Call call) {
  maybe_fail();
  ui::ActionResult result;
  result.changed = call.ids.empty() ? 1 : static_cast<int>(call.ids.size());
  result.message = call.action + " done (fake)";
  std::lock_guard lock(mutex_);
  calls_.push_back(std::move(call));
  return result;
}

ui::ActionResult FakeUiStore::retry(const std::vector<std::int64_t>& ids, const ui::Actor& actor) {
  return record({"retry", ids, "", "", actor});
}

ui::ActionResult FakeUiStore::cancel(const std::vector<std::int64_t>& ids,
                                     const std::string& reason, const ui::Actor& actor) {
  return record({"cancel", ids, "", reason, actor});
}

ui::ActionResult FakeUiStore::pause_queue(const std::string& queue, const ui::Actor& actor) {
  return record({"pause_queue", {}, queue, "", actor});
}

ui::ActionResult FakeUiStore::resume_queue(const std::string& queue, const ui::Actor& actor) {
  return record({"resume_queue", {}, queue, "", actor});
}

ui::ActionResult FakeUiStore::pause_schedule(const std::string& name, const ui::Actor& actor) {
  return record({"pause_schedule", {}, name, "", actor});
}

ui::ActionResult FakeUiStore::resume_schedule(const std::string& name, const ui::Actor& actor) {
  return record({"resume_schedule", {}, name, "", actor});
}

std::vector<FakeUiStore::Call> FakeUiStore::calls() {
  std::lock_guard lock(mutex_);
  return calls_;
}

std::vector<ui::JobFilter> FakeUiStore::filters() {
  std::lock_guard lock(mutex_);
  return filters_;
}

std::vector<bool> FakeUiStore::payload_requests() {
  std::lock_guard lock(mutex_);
  return payload_requests_;
}

ui::JobDetail FakeUiStore::make_job(std::int64_t id, const std::string& type,
                                    const std::string& status) {
  ui::JobDetail job;
  job.summary.id = id;
  job.summary.queue = "default";
  job.summary.type = type;
  job.summary.status = status;
  job.summary.attempts = 1;
  job.summary.max_attempts = 5;
  job.summary.run_at = "2026-12-01T10:00:00Z";
  job.summary.created_at = "2026-12-01T09:59:00Z";
  if (status == "failed" || status == "dead") job.summary.last_error = "exit code 1";
  job.payload_json = "{\n  \"n\": " + std::to_string(id) + "\n}";
  ui::AttemptInfo attempt;
  attempt.attempt = 1;
  attempt.worker = "host:1:w1";
  attempt.started_at = "2026-12-01T10:00:00Z";
  attempt.finished_at = "2026-12-01T10:00:01Z";
  attempt.seconds = 1.25;
  attempt.outcome = status == "running" ? "running" : "failed";
  job.attempts.push_back(attempt);
  return job;
}

}  // namespace pgjobd::testing
