#pragma once
// The dashboard's SQL (src/db/ui/pg_ui_store.cpp runs it), for one schema. Every statement is
// sent unnamed (PQexecParams): planned with its values each time, so the planner sees the
// status a list asks for and picks the partial index that holds it (a generic plan cannot
// prove `status = $1` implies an index's WHERE), and nothing is prepared that a
// transaction pooler could lose. The dashboard runs a few statements a second at most: a
// millisecond of planning each is nothing next to that.

#include <string>

namespace pgjobd::stmt {

struct UiStatements {
  // $1 name (text), $2 value (text): SET LOCAL in a function's clothes, for a $n value.
  std::string set_local;
  // Per known queue: queue, paused, then counts of pending, running, failed, dead,
  // cancelled, blocked, each at most $1 (the bound + 1), done among the newest $1 done rows,
  // whether there were $1 of those (then done is a lower bound), and the age in seconds of the
  // oldest due pending or failed job (0 when none).
  std::string overview_counts;
  // Per minute from max($1 epoch seconds, 59 minutes before this one) to this one: minute
  // (epoch seconds), done, failed; then one last row: -1, the current minute, 0.
  std::string throughput;
  // Live daemons: id, host, pid, version, concurrency, busy, leader, started and seen ages.
  std::string daemons;
  // Job list: $1 status, $2 queue, $3 type (each NULL = any), $4 ids below this, $5 rows,
  // $6 the most jobs a page looks at when done ones may match. Every row starts with the
  // lowest id looked at when that limit was reached (0 otherwise; the page ends there);
  // with no job, one row with that id and NULLs.
  std::string jobs;
  // The job list's row for id $1, if it has status $2, queue $3 and type $4 (NULL = any).
  std::string job_row;
  // One job: $1 id, $2 with payload and result (bool), $3 how many characters of their
  // JSON text to send (one more arrives when there was more). Compact text, indented by the
  // page: jsonb_pretty indents every level in full, 400-840 MB for a payload 10,000 arrays
  // deep (20 KB of jsonb).
  std::string job;
  // Job $1's first $2 parents, children: id, type, status ('' when gone), what the parent
  // ended as ('' while it runs; always '' for children), how many there are (at most $3).
  std::string job_parents;
  std::string job_children;
  // Attempts of job $1: attempt, worker, started, ended, seconds, outcome, error.
  std::string job_attempts;
  std::string queues;  // $1 as for overview_counts
  std::string schedules;
  std::string ping;             // no row: the database answers and the jobs table is there
  std::string audit;            // $1 limit
  std::string audit_insert;     // $1 user, $2 address, $3 action, $4 target, $5 ids, $6 detail
  std::string job_statuses;     // $1 ids bigint[]: id, status
  std::string retry_many;       // $1 ids bigint[]
  std::string cancel_many;      // $1 ids bigint[], $2 reason
  std::string queue_paused;     // $1 queue: paused (no row: never paused)
  std::string pause_queue;      // $1 queue
  std::string resume_queue;     // $1 queue
  std::string schedule_paused;  // $1 name: paused (no row: no such schedule)
  std::string pause_schedule;   // $1 name
  std::string resume_schedule;  // $1 name
};

// `schema` already quoted.
UiStatements ui_statements(const std::string& schema);

}  // namespace pgjobd::stmt
