// JobRunner: one job from handler call to completion hand-off.

#include "engine/job_runner.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "engine/retry_policy.hpp"
#include "log/log_fields.hpp"
#include "text/result_json.hpp"
#include "text/utf8.hpp"

namespace pgjobd {

void JobRunner::reconfigure(const RetryConfig& retry, HandlerTable handlers,
                            std::size_t max_result_bytes) {
  auto settings =
      std::make_shared<const Settings>(Settings{retry, std::move(handlers), max_result_bytes});
  std::lock_guard lock(settings_mutex_);
  settings_.swap(settings);  // the old ones are freed after the lock (declared before it)
}

JobResult JobRunner::call_handler(const Settings& settings, const Job& job,
                                  const std::stop_token& stop) {
  const auto it = settings.handlers.find(job.type);
  if (it == settings.handlers.end()) {
    // A reload removed the handler after the claim: hand the job back for a daemon that
    // still has one, without counting the attempt.
    return JobResult::released();
  }
  try {
    return it->second(job, stop);
  } catch (const std::exception& e) {
    return JobResult::retry(std::string("handler threw: ") + e.what());
  } catch (...) {
    return JobResult::retry("handler threw a non-standard exception");
  }
}

ScopedLogFields JobRunner::job_fields(const Job& job) {
  return ScopedLogFields{
      {"job_id", job.id}, {"type", job.type}, {"queue", job.queue}, {"attempt", job.attempt}};
}

std::optional<Completion> JobRunner::run(const Job& job, const JobStop& stop) {
  return start(job, stop, nullptr).completion;  // no JobFinish: never handed off
}

bool JobRunner::hands_off(const Job& job) const {
  if (job.oversized_payload_bytes > 0) return false;
  std::shared_lock lock(settings_mutex_);
  const auto it = settings_->handlers.find(job.type);
  return it != settings_->handlers.end() && it->second.target<AsyncHandler>() != nullptr;
}

JobStarted JobRunner::start(const Job& job, const JobStop& stop, const JobFinish& finish) {
  ScopedLogFields fields = job_fields(job);
  metrics_.job_started(job.queue, job.queue_wait_seconds);
  const auto started = std::chrono::steady_clock::now();
  std::shared_ptr<const Settings> settings;
  {
    std::shared_lock lock(settings_mutex_);
    settings = settings_;
  }
  // A job held for a thread (worker.prefetch) may be stopped before it starts: cancelled,
  // or its lease lost. Its handler is not called; the job ends as a stopped one (below).
  if (finish && !stop.stop_requested() && job.oversized_payload_bytes == 0) {
    const auto it = settings->handlers.find(job.type);
    const auto* async =
        it != settings->handlers.end() ? it->second.target<AsyncHandler>() : nullptr;
    if (async != nullptr) {
      try {
        // The settings go with the job: a reload meanwhile does not change how it ends.
        async->start(
            job, stop.token(), [this, settings, &job, &stop, started, finish](JobResult result) {
              ScopedLogFields ended_fields = job_fields(job);
              finish(conclude(*settings, job, stop, std::move(result), started, ended_fields));
            });
        return {true, std::nullopt};
      } catch (const std::exception& e) {
        return {false, conclude(*settings, job, stop,
                                JobResult::retry(std::string("handler threw: ") + e.what()),
                                started, fields)};
      }
    }
  }
  JobResult result =
      stop.stop_requested() ? JobResult::released()
      : job.oversized_payload_bytes > 0
          ? JobResult::dead("payload is " + std::to_string(job.oversized_payload_bytes) +
                            " bytes of JSON text, over worker.max_payload_bytes: not run")
          : call_handler(*settings, job, stop.token());
  return {false, conclude(*settings, job, stop, std::move(result), started, fields)};
}

std::optional<Completion> JobRunner::conclude(const Settings& settings, const Job& job,
                                              const JobStop& stop, JobResult result,
                                              std::chrono::steady_clock::time_point started,
                                              ScopedLogFields& fields) {
  if (stop.stop_requested() && !result.completion_written && result.outcome != Outcome::kDone) {
    // The daemon stopped the job: whatever the handler made of that, typically an
    // exception, says nothing about the job. Stopped for a cancel, it ends cancelled (the
    // completion writes the request's reason); stopped for the daemon's sake (drain
    // timeout, lost lease), it goes back to the queue without counting the attempt. A job
    // that got done anyway stays done.
    result = stop.cause() == StopCause::kCancelled ? JobResult::cancelled("cancelled")
                                                   : JobResult::released();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // Formatting a double costs more than a no-op job: only when a line will be logged.
  if (result.outcome != Outcome::kDone || spdlog::should_log(spdlog::level::debug)) {
    fields.add({"duration_ms", seconds * 1000.0});
  }

  // Whatever a handler said (an in-process handler may say megabytes), the job's row keeps
  // a bounded text: last_error and each entry of errors.
  Completion completion{{job.id, job.attempt},
                        result.outcome,
                        truncate_utf8(result.error, kMaxErrorBytes),
                        Millis(0)};
  if (completion.outcome == Outcome::kRetry && job.attempt >= job.max_attempts) {
    completion.outcome = Outcome::kDead;
  }
  switch (completion.outcome) {
    case Outcome::kDone:
      // Bounded here, whatever the handler kept (an in-process one may return megabytes).
      completion.result = stored_result(result.result, result.result_format, result.result_bytes,
                                        settings.max_result_bytes);
      spdlog::debug("job {} done", job.id);
      break;
    case Outcome::kRetry:
      // A handler's delay (an HTTP Retry-After) is the service's wish, not a reason to park
      // the job for centuries: capped like the backoff, so the database can always store it.
      completion.retry_delay =
          std::clamp(result.retry_after.value_or(retry_delay(settings.retry, job.attempt)),
                     Millis(0), settings.retry.max_delay);
      metrics_.retried();
      fields.add({"error", completion.error});
      spdlog::warn("job {} failed (attempt {} of {}), retry in {}", job.id, job.attempt,
                   job.max_attempts, format_duration(completion.retry_delay));
      break;
    case Outcome::kDead:
      fields.add({"error", completion.error});
      spdlog::warn("job {} dead after attempt {} of {}", job.id, job.attempt, job.max_attempts);
      break;
    case Outcome::kReleased:
      spdlog::info("job {} released back to the queue", job.id);
      break;
    case Outcome::kCancelled:
      spdlog::info("job {} cancelled (attempt {}): its handler was stopped", job.id, job.attempt);
      break;
  }
  metrics_.job_finished(job.queue, job.type, completion.outcome, seconds);
  if (result.completion_written) return std::nullopt;
  return completion;
}

}  // namespace pgjobd
