#pragma once
// The claim session's store (Fetcher): claims, the question of when the next job is due,
// and the limits' first read.

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "pgjobd/job.hpp"
#include "store/limit_store.hpp"

namespace pgjobd {

struct QueueSlots {
  std::string queue;
  int free = 0;
};

// What one claim asks for.
struct ClaimRequest {
  std::vector<QueueSlots> slots;   // free slots per queue
  std::vector<std::string> types;  // job types that have a handler
  int limit = 0;                   // at most this many jobs in all
  std::string worker_id;
  Millis lease{0};
  // A larger payload is not read: its job comes back with oversized_payload_bytes set.
  std::int64_t max_payload_bytes = std::int64_t{4} << 20;
  // Of `limit`, how many start at once (free workers); the others wait in the daemon for a
  // worker (worker.prefetch). -1: all. The limited claim marks jobs beyond it, which a
  // rate limit's bucket counts (sql/functions/pgjobd_claim_limited.sql).
  int startable = -1;
  // How many jobs the daemon holds whose handlers have not returned (claimed and waiting
  // for a worker, or running), when it knows: the limited claim counts its own jobs under
  // one limit by this rather than by their rows, which stay running until their
  // completions are written (sql/functions/pgjobd_claim_limited.sql, "One limit"). Never
  // less than the truth: -1 (not told) counts the rows.
  int own_running = -1;
  // The limits this daemon read say one unkeyed concurrency limit without a rate covers every
  // queue and type it serves (LimitRegistry::one_concurrency_limit): the limited claim asks
  // for that limit's room first and claims with the plain claim cut at it, cheaper by about
  // 1 ms a claim. The database decides: with other limits there, the limited claim runs.
  bool one_concurrency_limit = false;
};

// A limit that held back at least one due job in a claim.
struct LimitHold {
  std::string limit;
  std::string reason;  // "concurrency" or "rate"
  // rate: when the partition's next token is due; the claim is worth making again then.
  std::optional<std::chrono::microseconds> retry_in;
};

// What ClaimStore::next_due saw, at one moment of the database's clock.
struct DueTimes {
  // How long until the earliest job not due yet is. Nothing when there is none.
  std::optional<std::chrono::microseconds> next_in;
  // How long ago the job that came due last did, if within the look_back asked for (the
  // time since the claim began, and a margin). A due job the claim skipped is locked by
  // another session or has no slot, and waking for it again would only spin; but one that
  // came due after the claim looked was not skipped, and only this tells them apart.
  std::optional<std::chrono::microseconds> last_due_ago;
};

// A claim and, when it came back short, when the next job is due (ClaimStore::claim_with_due).
struct ClaimWithDue {
  std::vector<Job> jobs;
  // Set when the claim took fewer than request.limit jobs and the store answered; nothing
  // after a full claim.
  std::optional<DueTimes> due;
};

struct LimitedClaim {
  std::vector<Job> jobs;
  std::vector<LimitHold> held;
};

// Thrown by the plain claims (claim, claim_with_due, claim_ids) when the database holds a
// limit, which they saw in their own snapshot: they claimed nothing. A daemon that read no
// limit claims plainly, and learns of one added since only tens of ms later (its NOTIFY);
// jobs it claimed meanwhile would have run outside the limit. The caller reads the limits
// and claims with claim_limited.
class LimitsExist : public std::runtime_error {
 public:
  LimitsExist() : std::runtime_error("a limit exists: the claim must be the limited one") {}
};

// Every method throws DbError on failure; the store reconnects by itself on its next call.
class ClaimStore : public virtual LimitReader {
 public:
  ~ClaimStore() override = default;

  // Starts setting up the session in the background, so that the first statement does not
  // wait for all of it; a failure shows at that first statement, as it would have without.
  // Called at most once, before any other method. The default does nothing.
  virtual void connect_ahead() {}

  // Claims due jobs: at most request.limit in all and slots[i].free of queue slots[i].
  // While no limit exists: throws LimitsExist otherwise (so do claim_with_due and claim_ids).
  virtual std::vector<Job> claim(const ClaimRequest& request) = 0;

  // The claim, and, when it comes back short, the answer next_due(due_queues,
  // request.types) would give, in the same round trip and from the claim's own snapshot
  // and clock. A job the claim did not take for being due later is then next_in; nothing
  // can have come due after the claim looked, so last_due_ago is never set. A full claim
  // asks nothing: a daemon working off a backlog does not pay for the question. A store
  // may leave even a short claim unanswered (PgJobStore behind a transaction pooler, where
  // the plain claim is cheaper to plan); the caller then asks next_due.
  virtual ClaimWithDue claim_with_due(const ClaimRequest& request,
                                      const std::vector<std::string>& due_queues) = 0;

  // The claim when limits exist: the same request, each job also taking a slot or token of
  // every limit it matches; jobs whose limits have no room stay (README "Limits").
  virtual LimitedClaim claim_limited(const ClaimRequest& request) = 0;
  // Claims those of `ids` that claim() could take (due, of a served queue not paused and a
  // served type, within the request's slots and limit), found by id: the children a
  // completion of this daemon just unblocked, without the walk of the claim index that a
  // claim makes (over the entries of every job claimed since the last vacuum). No limits:
  // the fetcher calls it only while none applies.
  virtual std::vector<Job> claim_ids(const ClaimRequest& request,
                                     const std::vector<std::int64_t>& ids) = 0;

  // When the jobs this daemon could claim become due: the pending or failed jobs of
  // `queues` (paused ones left out) whose type is one of `types`. The fetcher asks after a
  // claim that came back short, so that it wakes when the next job is due instead of at
  // its next poll, and so that it claims again at once for a job that came due after the
  // claim looked (see DueTimes).
  virtual DueTimes next_due(const std::vector<std::string>& queues,
                            const std::vector<std::string>& types,
                            std::chrono::microseconds look_back) = 0;
};

}  // namespace pgjobd
