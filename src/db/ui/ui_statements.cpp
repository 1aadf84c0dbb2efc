// The dashboard's SQL. Plans measured next to 5,000,000 done rows (tests/
// pg_ui_store_pgtest.cpp checks them; bench/README.md "Dashboard" has the timings).

#include "db/ui/ui_statements.hpp"

#include "db/sql_text.hpp"
#include "db/statements.hpp"

namespace pgjobd::stmt {
namespace {

// The newest done rows, at most $1 of them, newest first by finished_at: retention's
// jobs_finished_idx backwards. No index holds done rows by queue (sql/008_dashboard.up.sql
// says why), so the done counts come from this window: exact while the table holds fewer
// done rows than the window, else a lower bound ("at least").
constexpr const char* kDoneWindow = R"(
done_window AS MATERIALIZED (
  SELECT j.queue FROM {jobs} j
  WHERE j.status IN ('done', 'dead', 'cancelled') AND j.status = 'done'
  ORDER BY j.finished_at DESC
  LIMIT $1
))";

// Every queue with live or failed jobs, recent done ones, or a row in pgjobd_queues,
// without reading the table: a loose index scan (one probe per distinct queue) of the
// claim index (pending, failed), of jobs_queue_status_idx (failed, dead, cancelled) and of
// jobs_blocked_idx, the few running rows, and the done window. A plain DISTINCT would read all 5M
// rows; a queue whose only jobs are done ones older than the window is not listed. With with_done
// false (the job list by status) the done window is left out: no done job is listed there. One
// loose index scan: the distinct queues of the rows `statuses` matches (the condition of a partial
// index holding them by queue), one probe each.
std::string loose_queues(const char* name, const char* statuses) {
  return std::string(name) + " AS (\n  (SELECT j.queue FROM {jobs} j WHERE j.status " + statuses +
         " ORDER BY j.queue LIMIT 1)\n  UNION ALL\n  SELECT (SELECT j.queue FROM {jobs} j\n"
         "          WHERE j.status " +
         statuses + " AND j.queue > f.queue\n          ORDER BY j.queue LIMIT 1)\n  FROM " + name +
         " f WHERE f.queue IS NOT NULL\n)";
}

std::string known_queues(bool with_done) {
  return std::string("\n") + loose_queues("failed_queues", "IN ('failed', 'dead', 'cancelled')") +
         ", " + loose_queues("live_queues", "IN ('pending', 'failed')") + ", " +
         loose_queues("blocked_queues", "= 'blocked'") + R"(, known AS (
  SELECT queue FROM failed_queues WHERE queue IS NOT NULL
  UNION SELECT queue FROM live_queues WHERE queue IS NOT NULL
  UNION SELECT queue FROM blocked_queues WHERE queue IS NOT NULL
  UNION SELECT j.queue FROM {jobs} j WHERE j.status = 'running'
  UNION SELECT p.queue FROM {queues} p)" +
         (with_done ? "\n  UNION SELECT w.queue FROM done_window w" : "") + "\n)";
}

// A count that stops at $1 rows, per status spelled as a literal so that each matches its
// partial index: pending (claim index), running (lease index), blocked (jobs_blocked_idx),
// the others (jobs_queue_status_idx). Each is a range scan of at most $1 index entries.
std::string bounded_count(const char* status) {
  return std::string(
             "(SELECT count(*) FROM (SELECT 1 FROM {jobs} j WHERE j.queue = k.queue AND "
             "j.status = '") +
         status + "' LIMIT $1) x)";
}

// After the counts: done in the window, whether the window is full (the done count is then
// a lower bound), the oldest due job's age.
constexpr const char* kOverviewTail = R"(
       (SELECT count(*) FROM done_window w WHERE w.queue = k.queue),
       (SELECT count(*) FROM done_window) >= $1,
       coalesce((SELECT extract(epoch FROM now() - min(greatest(j.run_at, now() - interval '100 years')))
                 FROM {jobs} j
                 WHERE j.queue = k.queue AND j.status IN ('pending', 'failed')
                   AND j.run_at <= now()), 0)::float8
FROM known k LEFT JOIN {queues} p ON p.queue = k.queue
ORDER BY k.queue)";

// Done per minute comes from retention's jobs_finished_idx (finished_at of done, dead and
// cancelled rows), a range of the minutes asked for: the store asks only for the minutes it
// has not kept yet (the last two, once the first hour is loaded). Failed is the attempts
// that ended dead in the minute plus the jobs waiting for a retry whose failed attempt
// ended in it (updated_at; the claim index holds them). A job that failed and later
// succeeded counts as done only: its failure lives in attempt_log, which no index reaches.
constexpr const char* kThroughput = R"(
WITH span AS (
  SELECT greatest(date_trunc('minute', to_timestamp($1::bigint)),
                  date_trunc('minute', now()) - interval '59 minutes') AS s,
         date_trunc('minute', now()) AS cur
), minutes AS (
  SELECT m FROM span, generate_series(span.s, span.cur, interval '1 minute') m
), finished AS (
  SELECT date_trunc('minute', j.finished_at) AS m,
         count(*) FILTER (WHERE j.status = 'done') AS done,
         count(*) FILTER (WHERE j.status = 'dead') AS dead
  FROM span, {jobs} j
  WHERE j.status IN ('done', 'dead', 'cancelled') AND j.finished_at >= span.s
  GROUP BY 1
), retrying AS (
  SELECT date_trunc('minute', j.updated_at) AS m, count(*) AS n
  FROM span, {jobs} j
  WHERE j.status IN ('pending', 'failed') AND j.status = 'failed' AND j.updated_at >= span.s
  GROUP BY 1
)
SELECT extract(epoch FROM minutes.m)::bigint, coalesce(f.done, 0)::bigint,
       (coalesce(f.dead, 0) + coalesce(r.n, 0))::bigint
FROM minutes LEFT JOIN finished f USING (m) LEFT JOIN retrying r USING (m)
UNION ALL
SELECT -1, extract(epoch FROM span.cur)::bigint, 0 FROM span
ORDER BY 1)";

constexpr const char* kDaemons = R"(
SELECT d.id, d.host, d.pid, d.version, d.concurrency, d.busy,
       coalesce(l.leader_id = d.id AND l.expires_at > now(), false),
       extract(epoch FROM now() - d.started_at)::float8,
       extract(epoch FROM now() - d.seen_at)::float8
FROM {daemons} d LEFT JOIN {leader} l ON l.role = 'maintenance'
WHERE d.expires_at >= now()
ORDER BY d.host, d.pid, d.id)";

// One branch of the job list for a status the list finds by index: the newest rows of
// one queue in that status, below $4, with the type filter. The status is a literal (its
// partial index is matched) and the branch is switched off, at planning, unless $1 asks for
// that status.
std::string list_branch(const char* status) {
  return std::string("(SELECT j.id FROM {jobs} j WHERE $1::text = '") + status +
         "' AND j.queue = c.queue AND j.status = '" + status +
         "' AND j.id < $4 AND ($3::text IS NULL OR j.type = $3) ORDER BY j.id DESC LIMIT $5)";
}

// Keyset pages, newest first, never OFFSET. Two ways, by the status asked for:
// - failed, dead, cancelled, pending, running, blocked: for the queue asked for (or each known
//   queue) the newest $5 rows from the partial index that holds them, then the newest $5
//   of those. Exact, and each branch a short backward range scan.
// - done, or any status: no index holds done rows by queue or type, so the page looks at
//   the newest $6 jobs below $4 (the primary key backwards: `scan`; the status is tested
//   after, so that done rows made rare by retention cannot make it read the whole table)
//   and keeps those that match. When the scan is full, the jobs below it were not looked at: the
//   page ends at the scan's lowest id (returned first in every row, 0 when the scan was not full),
//   and the next page starts there. A page with a rare queue or type may hold fewer jobs than asked
//   for, even none, and still have a next page; none reads more than $6 rows.
std::string jobs_sql() {
  std::string sql = std::string("WITH RECURSIVE ") + known_queues(false) + R"(, chosen AS (
  SELECT $2::text AS queue WHERE $2::text IS NOT NULL AND $1::text <> 'done'
  UNION ALL
  SELECT queue FROM known WHERE $2::text IS NULL AND $1::text <> 'done'
), scan AS MATERIALIZED (
  SELECT j.id, j.queue, j.type, j.status FROM {jobs} j
  WHERE ($1::text IS NULL OR $1::text = 'done') AND j.id < $4
  ORDER BY j.id DESC LIMIT $6
), edge AS (
  SELECT CASE WHEN count(*) >= $6 THEN min(s.id) ELSE 0 END AS low FROM scan s
), picked AS (
  SELECT s.id FROM scan s
  WHERE ($1::text IS NULL OR s.status = 'done') AND ($2::text IS NULL OR s.queue = $2)
    AND ($3::text IS NULL OR s.type = $3)
  UNION ALL
  SELECT x.id FROM chosen c CROSS JOIN LATERAL (
)";
  const char* statuses[] = {"failed", "dead", "cancelled", "pending", "running", "blocked"};
  bool first = true;
  for (const char* status : statuses) {
    if (!first) sql += "\n    UNION ALL\n";
    sql += "    " + list_branch(status);
    first = false;
  }
  sql += R"(
  ) x
), page AS (
  SELECT p.id FROM picked p, edge e WHERE p.id >= e.low ORDER BY p.id DESC LIMIT $5
)
SELECT e.low, {summary}
FROM edge e LEFT JOIN (page pg JOIN {jobs} j ON j.id = pg.id) ON true
ORDER BY j.id DESC NULLS LAST)";
  return sql;
}

std::string iso(const std::string& column) {
  return "coalesce(to_char(" + column +
         R"( AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), ''))";
}

std::string summary_columns() {
  return "j.id, j.queue, j.type, j.status, j.priority, j.attempts, j.max_attempts, " +
         iso("j.run_at") + ", " + iso("j.created_at") + ", " + iso("j.finished_at") +
         ", coalesce(left(j.last_error, 200), '')";
}

// A job's first $2 parents or children (by id) with their type and status ('' for a job
// gone), `ended` (an expression of the edge x.parent_status and the other job's row j),
// and how many there are, counted up to $3: rows of pgjobd_dependencies by its primary key
// (child_id, parent_id) or its parent_id index.
std::string job_links(const char* self, const char* other, const char* ended) {
  const std::string deps = "{schema}.pgjobd_dependencies";
  return std::string("SELECT x.id, coalesce(j.type, ''), coalesce(j.status, ''), ") + ended +
         ", t.n FROM (SELECT d." + other + " AS id, d.parent_status FROM " + deps + " d WHERE d." +
         self + " = $1 ORDER BY d." + other + " LIMIT $2) x " +
         "CROSS JOIN (SELECT count(*) AS n FROM (SELECT 1 FROM " + deps + " d WHERE d." + self +
         " = $1 LIMIT $3) c) t LEFT JOIN {jobs} j ON j.id = x.id ORDER BY x.id";
}

std::string expand(std::string sql, const std::string& schema) {
  replace_all(sql, "{summary}", summary_columns());
  return with_tables(std::move(sql), schema);
}

}  // namespace

UiStatements ui_statements(const std::string& schema) {
  UiStatements s;
  s.set_local = "SELECT set_config($1, $2, true)";
  s.overview_counts = expand(
      std::string("WITH RECURSIVE ") + kDoneWindow + "," + known_queues(true) +
          "\nSELECT k.queue, coalesce(p.paused, false),\n       " + bounded_count("pending") +
          ",\n       " + bounded_count("running") + ",\n       " + bounded_count("failed") +
          ",\n       " + bounded_count("dead") + ",\n       " + bounded_count("cancelled") +
          ",\n       " + bounded_count("blocked") + "," + kOverviewTail,
      schema);
  s.throughput = expand(kThroughput, schema);
  s.daemons = expand(kDaemons, schema);
  s.jobs = expand(jobs_sql(), schema);
  s.job_row = expand(
      "SELECT {summary} FROM {jobs} j WHERE j.id = $1 AND ($2::text IS NULL OR j.status = $2) "
      "AND ($3::text IS NULL OR j.queue = $3) AND ($4::text IS NULL OR j.type = $4)",
      schema);
  s.job = expand(
      "SELECT {summary}, CASE WHEN $2::bool THEN left(j.payload::text, $3 + 1) END, "
      "coalesce(j.locked_by, ''), " +
          iso("j.locked_until") + ", " + iso("j.started_at") + ", " + iso("j.updated_at") +
          ", coalesce(j.unique_key, ''), j.cancel_requested_at IS NOT NULL, "
          "coalesce(j.cancel_reason, ''), CASE WHEN $2::bool THEN left(j.result::text, $3 + 1) END "
          "FROM {jobs} j WHERE j.id = $1",
      schema);
  // A parent that ended done leaves its edge unwritten while its row is kept
  // (sql/functions/pgjobd_dependencies.sql): the row says it.
  s.job_parents = expand(job_links("child_id", "parent_id",
                                   "coalesce(x.parent_status, CASE WHEN j.status = 'done' "
                                   "THEN 'done' END, '')"),
                         schema);
  s.job_children = expand(job_links("parent_id", "child_id", "''"), schema);
  // The kept attempts (pgjobd_job_attempts: attempt_log, and a done job's last attempt),
  // then the one running now, which no log holds yet.
  s.job_attempts = expand(
      "SELECT a.attempt, coalesce(a.worker, ''), " + iso("a.started_at") + ", " +
          iso("a.ended_at") +
          ", coalesce(a.seconds, 0), coalesce(a.outcome, ''), coalesce(left(a.error, 2000), '') "
          "FROM {schema}.pgjobd_job_attempts($1::bigint) a "
          "UNION ALL "
          "SELECT j.attempts, coalesce(j.locked_by, ''), " +
          iso("j.started_at") +
          ", '', coalesce(extract(epoch FROM now() - j.started_at)::float8, 0), 'running', '' "
          "FROM {jobs} j WHERE j.id = $1 AND j.status = 'running'",
      schema);
  s.queues = expand(std::string("WITH RECURSIVE ") + kDoneWindow + "," + known_queues(true) +
                        "\nSELECT k.queue, coalesce(p.paused, false), " + iso("p.updated_at") +
                        " FROM known k LEFT JOIN {queues} p ON p.queue = k.queue "
                        "ORDER BY k.queue",
                    schema);
  s.ping = expand("SELECT 1 FROM {jobs} LIMIT 0", schema);
  s.schedules = expand(
      "SELECT s.name, coalesce(s.cron, ''), coalesce(s.every_seconds, 0), "
      "s.timezone, s.type, s.queue, s.enabled, s.paused, " +
          iso("s.last_tick") + ", " + iso("s.next_tick") + " FROM {schedules} s ORDER BY s.name",
      schema);
  // Latest first by the primary key (sql/008_dashboard.up.sql says why not by `at`).
  s.audit = expand("SELECT a.id, " + iso("a.at") +
                       ", a.user_name, a.remote_address, a.action, a.target, "
                       "array_to_string(a.job_ids, ','), a.detail "
                       "FROM {audit} a ORDER BY a.id DESC LIMIT $1",
                   schema);
  s.audit_insert = expand(
      "INSERT INTO {audit} (user_name, remote_address, action, target, job_ids, detail) "
      "VALUES ($1, $2, $3, $4, $5::bigint[], $6)",
      schema);
  s.job_statuses =
      expand("SELECT j.id, j.status FROM {jobs} j WHERE j.id = ANY($1::bigint[])", schema);
  s.retry_many = expand(
      "SELECT r.id, r.previous_status, r.retried FROM {schema}.pgjobd_retry_many($1::bigint[]) r",
      schema);
  s.cancel_many = expand(
      "SELECT c.id, c.status FROM {schema}.pgjobd_cancel_many($1::bigint[], $2::text) c", schema);
  s.queue_paused = expand("SELECT p.paused FROM {queues} p WHERE p.queue = $1", schema);
  s.pause_queue = expand("SELECT {schema}.pgjobd_pause_queue($1::text)", schema);
  s.resume_queue = expand("SELECT {schema}.pgjobd_resume_queue($1::text)", schema);
  s.schedule_paused = expand("SELECT s.paused FROM {schedules} s WHERE s.name = $1", schema);
  s.pause_schedule = expand("SELECT {schema}.pgjobd_schedule_pause($1::text)", schema);
  s.resume_schedule = expand("SELECT {schema}.pgjobd_schedule_resume($1::text)", schema);
  return s;
}

}  // namespace pgjobd::stmt
