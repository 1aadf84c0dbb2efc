#pragma once
// Runs one job: calls its handler, turns an exception into a failure, decides retry or
// dead, records metrics and logs, and returns the outcome for the completer. Never
// touches the database itself.

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>

#include "engine/job_finish.hpp"
#include "engine/job_stop.hpp"
#include "log/log_fields.hpp"
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
  // Like run(), but a job whose handler is an AsyncHandler is handed to it and this returns
  // at once (handed_off): `finish` then gets the completion on the handler's thread. The
  // job and its stop outlive that call.
  JobStarted start(const Job& job, const JobStop& stop, const JobFinish& finish);
  // Whether start() would hand this job over (WorkerPool::HandsOff).
  bool hands_off(const Job& job) const;

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
  // The job's log fields, on whichever thread runs or ends it.
  static ScopedLogFields job_fields(const Job& job);
  // From a handler's result to the completion: what a stop means, retry or dead, logs and
  // metrics.
  std::optional<Completion> conclude(const Settings& settings, const Job& job, const JobStop& stop,
                                     JobResult result,
                                     std::chrono::steady_clock::time_point started,
                                     ScopedLogFields& fields);

  // A lock, not std::atomic<std::shared_ptr>: libstdc++ 12 implements the latter with a
  // lock bit inside the pointer that ThreadSanitizer cannot see. Held only to copy; shared,
  // so that 64 workers starting jobs at once do not queue for it (as an exclusive mutex,
  // it made a tenth of the daemon's futex calls on a backlog of no-op jobs).
  mutable std::shared_mutex settings_mutex_;
  std::shared_ptr<const Settings> settings_;
  Metrics& metrics_;
};

}  // namespace pgjobd
