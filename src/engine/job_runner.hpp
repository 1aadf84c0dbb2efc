#pragma once
// Runs one job: calls its handler, turns an exception into a failure, decides retry or
// dead, records metrics and logs, and returns the outcome for the completer. Never
// touches the database itself.

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>

#include "engine/job_stop.hpp"
#include "metrics/metrics.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"
#include "store/job_store.hpp"

namespace pgjobd {

using HandlerTable = std::map<std::string, Handler>;

class JobRunner {
 public:
  // max_result_bytes: worker.max_result_bytes, the bound of a done job's result.
  JobRunner(const RetryConfig& retry, HandlerTable handlers, Metrics& metrics,
            std::size_t max_result_bytes)
      : metrics_(metrics) {
    reconfigure(retry, std::move(handlers), max_result_bytes);
  }

  // Returns the completion to write, or nothing when the handler wrote it itself. The
  // caller hands it to the completer only after marking the job finished, so a heartbeat
  // never mistakes a job whose "done" is already written for a lost lease. `stop` says
  // whether, and why, the daemon stopped the job.
  std::optional<Completion> run(const Job& job, const JobStop& stop);

  // Longest error text kept for a job (last_error, each entry of errors), in bytes.
  static constexpr std::size_t kMaxErrorBytes = 8192;

  // Live reload: jobs that start from now on use the new handlers and retry policy;
  // running jobs finish with the ones they started with.
  void reconfigure(const RetryConfig& retry, HandlerTable handlers, std::size_t max_result_bytes);

 private:
  struct Settings {
    RetryConfig retry;
    HandlerTable handlers;
    std::size_t max_result_bytes;
  };
  JobResult call_handler(const Settings& settings, const Job& job, const std::stop_token& stop);

  // A lock, not std::atomic<std::shared_ptr>: libstdc++ 12 implements the latter with a
  // lock bit inside the pointer that ThreadSanitizer cannot see. Held only to copy; shared,
  // so that 64 workers starting jobs at once do not queue for it (as an exclusive mutex,
  // it made a tenth of the daemon's futex calls on a backlog of no-op jobs).
  mutable std::shared_mutex settings_mutex_;
  std::shared_ptr<const Settings> settings_;
  Metrics& metrics_;
};

}  // namespace pgjobd
