#pragma once
// Prometheus metrics of one engine. Families are built once at start-up; children for the
// configured queues and handler types are created up front so the hot path never calls
// Add() (which takes a lock and allocates). Label values are queue, type, outcome, status
// and operation: never a job id.

#include <memory>
#include <string>
#include <vector>

#include "pgjobd/job.hpp"

namespace prometheus {
class Registry;
}

namespace pgjobd {

class Metrics {
 public:
  // queues and types: the label values known at start (others are added lazily).
  Metrics(const std::vector<std::string>& queues, const std::vector<std::string>& types);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const;

  // pgjobd_jobs_total{queue,type,outcome} and pgjobd_job_duration_seconds{queue,type,outcome}.
  // outcome is "done", "retry", "dead" or "released".
  void job_finished(const std::string& queue, const std::string& type, Outcome outcome,
                    double duration_seconds);
  // pgjobd_queue_wait_seconds{queue}: start − run_at.
  void job_started(const std::string& queue, double queue_wait_seconds);
  // pgjobd_queue_depth{queue,status}; replaces all previous values of the gauge.
  struct DepthRow {
    std::string queue;
    std::string status;
    double count;
  };
  void set_queue_depth(const std::vector<DepthRow>& rows);
  // pgjobd_oldest_due_job_age_seconds{queue}; a queue missing from `ages` is set to 0.
  void set_oldest_due_age(const std::vector<std::pair<std::string, double>>& ages);
  void set_workers_busy(int busy);              // pgjobd_workers_busy
  void set_workers_max(int max);                // pgjobd_workers_max
  void retried();                               // pgjobd_retries_total
  void rescued(int count);                      // pgjobd_rescued_total
  void stale_write(int count);                  // pgjobd_stale_writes_total
  void completion_dropped();                    // pgjobd_completions_dropped_total
  void fetch_batch(int size);                   // pgjobd_fetch_batch_size (histogram)
  void set_poll_interval(double seconds);       // pgjobd_poll_interval_seconds
  void db_error(const std::string& operation);  // pgjobd_db_errors_total{operation}
  void config_reload(bool applied);             // pgjobd_config_reloads_total{result}

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pgjobd
