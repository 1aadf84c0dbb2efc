#pragma once
// A claimed job as a handler sees it, and the result a handler returns.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace pgjobd {

// One claimed row of the jobs table. `attempt` is 1 on the first run.
struct Job {
  std::int64_t id = 0;
  std::string queue;
  std::string type;
  std::string payload = "{}";  // JSON text, exactly as stored (jsonb::text)
  int attempt = 1;
  int max_attempts = 5;
  int priority = 0;
  double queue_wait_seconds = 0;  // start − run_at, for the queue-wait histogram
  // Non-zero when the payload, as JSON text, was larger than worker.max_payload_bytes: it
  // was not read (payload is empty) and no handler sees the job; it ends dead.
  std::int64_t oversized_payload_bytes = 0;
  // A job with parents (README "Dependencies"): how each ended and what it returned, the
  // JSON text of the payload's `_parents` object ({"<id>": {"status", "result"}}); "" when
  // the payload has none.
  std::string parents;
};

enum class Outcome {
  kDone,      // success
  kRetry,     // failed; retried after backoff unless attempts are exhausted
  kDead,      // permanent failure: never retried
  kReleased,  // not run to completion (shutdown): back to pending, attempt not counted
  // Stopped because pgjobd_cancel asked: never retried. The daemon sets it when it stopped
  // a handler for a cancel; a handler may return it too (its error becomes last_error).
  kCancelled,
};

const char* to_string(Outcome outcome);

struct JobResult {
  Outcome outcome = Outcome::kDone;
  std::string error;  // why it failed (kRetry / kDead); becomes last_error
  // When set, overrides the exponential backoff (e.g. an HTTP Retry-After). Capped to
  // [0, retry.max_delay]: a negative delay is 0, a longer one is retry.max_delay.
  std::optional<std::chrono::milliseconds> retry_after;
  // The handler already wrote the job's final state itself, in the transaction of its own
  // work (the sql handler): the completer must not write it again.
  bool completion_written = false;

  static JobResult done() { return {}; }
  static JobResult retry(std::string error,
                         std::optional<std::chrono::milliseconds> after = std::nullopt) {
    return {Outcome::kRetry, std::move(error), after};
  }
  static JobResult dead(std::string error) { return {Outcome::kDead, std::move(error), {}}; }
  static JobResult released() { return {Outcome::kReleased, {}, {}}; }
};

}  // namespace pgjobd
