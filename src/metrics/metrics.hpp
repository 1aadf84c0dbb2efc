#pragma once
// Prometheus metrics of one engine. Families are built once at start-up; children for the
// configured queues and handler types are created up front so the hot path never calls
// Add() (which takes a lock and allocates). Label values are queue, type, outcome, status
// and operation: never a job id, and never a queue or type name read from the table
// alone. Every series is bounded by the configuration: anything an application can insert
// (a new queue name, a job type without a handler) is folded into one "(other)" series or
// ignored, so /metrics and the daemon's memory stay the same size however many distinct
// names the table holds.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pgjobd/job.hpp"

namespace prometheus {
class Collectable;
}

namespace pgjobd {

class Metrics {
 public:
  // queues and types: the served queues (worker.queues) and the job types with a handler.
  Metrics(const std::vector<std::string>& queues, const std::vector<std::string>& types);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Every series, for a scrape (or a test): the per-job ones are buffered per thread and
  // applied by its Collect().
  std::shared_ptr<prometheus::Collectable> collectable() const;

  // The label value that stands for a queue or type the configuration never named.
  static constexpr const char* kOtherLabel = "(other)";

  // A live reload: the queues this daemon now serves and the types it now has handlers
  // for. Queues that are no longer served lose their queue-depth series; new ones get
  // them. Job counters keep the series of queues and types configured earlier (a job
  // claimed before the reload may still finish under them; counters must not reset).
  void set_served(const std::vector<std::string>& queues, const std::vector<std::string>& types);

  // pgjobd_jobs_total{queue,type,outcome} and pgjobd_job_duration_seconds{queue,type,outcome}.
  // outcome is "done", "retry", "dead" or "released". A queue or type never configured
  // since start counts as kOtherLabel.
  void job_finished(const std::string& queue, const std::string& type, Outcome outcome,
                    double duration_seconds);
  // pgjobd_queue_wait_seconds{queue}: start − run_at.
  void job_started(const std::string& queue, double queue_wait_seconds);
  // pgjobd_queue_depth{queue,status}; replaces all previous values of the gauge. Rows of
  // queues not served now are ignored, as are statuses other than pending, failed and
  // running.
  struct DepthRow {
    std::string queue;
    std::string status;
    double count;
  };
  void set_queue_depth(const std::vector<DepthRow>& rows);
  // pgjobd_oldest_due_job_age_seconds{queue}; a served queue missing from `ages` is set
  // to 0, one not served is ignored.
  void set_oldest_due_age(const std::vector<std::pair<std::string, double>>& ages);
  // pgjobd_queue_paused{queue}: 1 for the served queues in `paused`, 0 for the other served
  // queues; a queue not served is ignored.
  void set_queue_paused(const std::vector<std::string>& paused);
  // pgjobd_queue_blocked{queue}: the count in `blocked` for each served queue (0 when
  // missing); a queue not served is ignored.
  void set_queue_blocked(const std::vector<std::pair<std::string, double>>& blocked);
  void set_workers_busy(int busy);         // pgjobd_workers_busy
  void set_jobs_held(int held);            // pgjobd_jobs_held
  void set_workers_max(int max);           // pgjobd_workers_max
  void retried();                          // pgjobd_retries_total
  void rescued(int count);                 // pgjobd_rescued_total
  void stale_write(int count);             // pgjobd_stale_writes_total
  void lease_renewal_held();               // pgjobd_lease_renewals_held_total
  void completion_dropped();               // pgjobd_completions_dropped_total
  void completion_held();                  // pgjobd_completions_held_total
  void set_completions_waiting(double n);  // pgjobd_completions_waiting_for_row_lock
  void fetch_batch(int size);              // pgjobd_fetch_batch_size (histogram)
  void claim_duration(double seconds);     // pgjobd_claim_duration_seconds (histogram)
  void set_poll_interval(double seconds);  // pgjobd_poll_interval_seconds
  // pgjobd_finished_unannounced_total: jobs ended but not announced on pgjobd_finished.
  void finished_unannounced(std::size_t jobs);
  // pgjobd_db_errors_total{operation}; an operation not in the README's list counts as
  // kOtherLabel. Every listed operation (and kOtherLabel) shows at 0 from the start, in
  // both families. A call abandoned at its deadline (DbError::timed_out) also counts in
  // pgjobd_db_call_timeouts_total{operation}.
  void db_error(const std::string& operation, bool timed_out = false);
  // pgjobd_loop_errors_total{loop}: an exception other than a database error caught at a
  // loop's boundary: "claim", "complete", "maintenance", "schedule" or "listen" (else
  // kOtherLabel).
  void loop_error(std::string_view loop);
  void config_reload(bool applied);  // pgjobd_config_reloads_total{result}
  // pgjobd_schedule_fires_total{schedule,result}: result "fired", "skipped_overlap" or
  // "missed". Schedules made with SQL are named by the table, so only the first
  // kMaxScheduleLabels names get a series of their own; later ones count as kOtherLabel.
  static constexpr std::size_t kMaxScheduleLabels = 200;
  void schedule_fires(const std::string& schedule, const std::string& result, int count);
  // pgjobd_schedule_overdue_seconds: the worst lateness the scheduler's last pass found: the
  // age of the oldest tick a due schedule has not fired, or, while every pass misses ticks,
  // of the first tick missed since (0 when none is behind).
  void set_schedule_overdue(double seconds);
  // pgjobd_limit_throttled_total{limit,reason}: a claim in which the limit held a due job
  // back, reason "concurrency" or "rate". pgjobd_limit_running{limit}: jobs running under
  // each unkeyed limit (the given ones; other series are removed). Limits are named by
  // config, but another daemon's may differ: at most kMaxLimitLabels series each.
  static constexpr std::size_t kMaxLimitLabels = 200;
  void limit_throttled(const std::string& limit, const std::string& reason);
  // The limits in force and the reasons each can throttle for ("concurrency" when it has
  // one, "rate" when it has one): their pgjobd_limit_throttled_total series show at 0 from
  // now on. Series of limits removed since stay (counters never reset).
  void set_limits(const std::vector<std::pair<std::string, std::string>>& limit_reasons);
  void set_limit_running(const std::vector<std::pair<std::string, double>>& running);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pgjobd
