#pragma once
// A claimed job as a handler sees it, and the result a handler returns.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

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
  // the payload has none. Read from the payload at each call, not at the claim: most
  // handlers never ask, and a fan-in's object can hold thousands of parents.
  std::string parents() const;
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

// How JobResult::result is stored in jobs.result (README "Results").
enum class ResultFormat {
  // JSON text, stored as that JSON. Text that is not JSON, or JSON PostgreSQL cannot store
  // (a \u0000, nesting deeper than 1,000, a number of more than 1,000 characters or beyond
  // 1e±1000), is stored as a JSON string of the text instead.
  kJson,
  kText,  // always a JSON string of the text, even when it reads as JSON
};

struct JobResult {
  Outcome outcome = Outcome::kDone;
  std::string error;  // why it failed (kRetry / kDead); becomes last_error
  // When set, overrides the exponential backoff (e.g. an HTTP Retry-After). Capped to
  // [0, retry.max_delay]: a negative delay is 0, a longer one is retry.max_delay.
  std::optional<std::chrono::milliseconds> retry_after;
  // The handler already wrote the job's final state itself, in the transaction of its own
  // work (the sql handler): the completer must not write it again.
  bool completion_written = false;
  // What the job returned, kept in jobs.result when it ends done (ignored otherwise), read
  // as result_format says; empty: no result (NULL). Above worker.max_result_bytes bytes the
  // daemon stores {"truncated": true, "bytes": <its size>, "head": "<its first
  // max_result_bytes bytes>"} instead, and the job is done all the same.
  std::string result;
  ResultFormat result_format = ResultFormat::kJson;
  // The whole result's size in bytes when `result` holds only its first bytes (a handler
  // that keeps no more than the bound while reading); 0: `result` is whole.
  std::size_t result_bytes = 0;

  static JobResult done() { return {}; }
  // Done, returning `json`: JSON text such as R"({"rows": 3})" (ResultFormat::kJson).
  static JobResult done(std::string json) {
    JobResult returned;
    returned.result = std::move(json);
    return returned;
  }
  // Done, returning `text` as a JSON string, even when it reads as JSON ("42" stays "42").
  static JobResult done_text(std::string text) {
    JobResult returned = done(std::move(text));
    returned.result_format = ResultFormat::kText;
    return returned;
  }
  static JobResult retry(std::string error,
                         std::optional<std::chrono::milliseconds> after = std::nullopt) {
    JobResult failed = ended(Outcome::kRetry, std::move(error));
    failed.retry_after = after;
    return failed;
  }
  static JobResult dead(std::string error) { return ended(Outcome::kDead, std::move(error)); }
  static JobResult released() { return ended(Outcome::kReleased, {}); }
  static JobResult cancelled(std::string error) {
    return ended(Outcome::kCancelled, std::move(error));
  }

 private:
  static JobResult ended(Outcome outcome, std::string error) {
    JobResult ended_with;
    ended_with.outcome = outcome;
    ended_with.error = std::move(error);
    return ended_with;
  }
};

}  // namespace pgjobd
