#pragma once
// Every SQL statement pgjobd runs against the jobs table, named and prepared once per
// connection. `{jobs}` in the text stands for the quoted, schema-qualified table name.

#include <string>
#include <vector>

namespace pgjobd::stmt {

// Claim: $1 queues text[], $2 free slots per queue int[], $3 types text[], $4 total limit,
// $5 worker id, $6 lease ms. Returns the claimed jobs.
inline constexpr const char* kClaim = "pgjobd_claim";
// Complete as done: $1 ids bigint[], $2 attempts int[], $3 worker id. Returns ids written.
inline constexpr const char* kCompleteDone = "pgjobd_complete_done";
// Same, deleting the rows (retention.done = 0).
inline constexpr const char* kCompleteDoneDelete = "pgjobd_complete_done_delete";
// Fail, kill or release: $1 jsonb [{id, attempt, status, error, delay_ms}], $2 worker id.
inline constexpr const char* kCompleteOther = "pgjobd_complete_other";
// Lease heartbeat: $1 ids, $2 attempts, $3 worker id, $4 lease ms. Returns ids renewed.
inline constexpr const char* kHeartbeat = "pgjobd_heartbeat";
// Rescue expired leases: $1 retry base ms, $2 max delay ms, $3 jitter, $4 batch size.
inline constexpr const char* kRescue = "pgjobd_rescue";
// Retention: delete up to $3 finished rows; done/cancelled older than $1 ms, dead older
// than $2 ms. Returns the number deleted.
inline constexpr const char* kPrune = "pgjobd_prune";
// Live jobs by queue and status.
inline constexpr const char* kQueueDepth = "pgjobd_queue_depth";
// Age of the oldest due job per queue.
inline constexpr const char* kOldestDue = "pgjobd_oldest_due";

struct Statement {
  const char* name;
  std::string sql;
};

// All statements with {jobs} replaced by `table` (already quoted).
std::vector<Statement> job_statements(const std::string& table);

}  // namespace pgjobd::stmt
