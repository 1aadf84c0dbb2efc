// The SQL of the benchmark's scratch schema: DDL, bulk INSERTs and the end-of-run check.

#include "db/bench/bench_schema.hpp"

#include <spdlog/spdlog.h>
#include <pqxx/pqxx>
#include <utility>

#include "db/db_session.hpp"
#include "db/migrator.hpp"
#include "db/sql_text.hpp"

namespace pgjobd {

BenchSchema::BenchSchema(const DatabaseConfig& config, std::string job_type)
    : schema_(config.schema),
      table_(quote_identifier(config.schema) + ".jobs"),
      job_type_(std::move(job_type)),
      session_(std::make_unique<DbSession>(config, "bench")) {
  session_->connect("");
}

BenchSchema::~BenchSchema() = default;

template <typename Fn>
auto BenchSchema::run(Fn&& fn) {
  return session_->connect_and_call("", Millis(0), std::forward<Fn>(fn));
}

void BenchSchema::exec(const std::string& sql) {
  run([&] {
    pqxx::nontransaction txn(session_->connection());
    txn.exec(sql);
  });
}

void BenchSchema::recreate() {
  drop();
  run([&] { migrate(session_->connection(), schema_); });
}

void BenchSchema::drop() {
  exec("DROP SCHEMA IF EXISTS " + quote_identifier(schema_) + " CASCADE");
}

long long BenchSchema::reuse_pending() {
  return run([&] {
    {
      pqxx::nontransaction txn(session_->connection());
      if (txn.exec_params("SELECT to_regclass($1) IS NULL", table_)[0][0].as<bool>()) return -1LL;
    }
    migrate(session_->connection(), schema_);
    pqxx::nontransaction txn(session_->connection());
    txn.exec("DELETE FROM " + table_ + " WHERE status <> 'pending'");
    return txn.exec("SELECT count(*) FROM " + table_)[0][0].as<long long>();
  });
}

void BenchSchema::truncate() { exec("TRUNCATE " + table_); }

void BenchSchema::set_notify_trigger(bool enabled) {
  exec("ALTER TABLE " + table_ + (enabled ? " ENABLE" : " DISABLE") +
       " TRIGGER jobs_notify_insert");
}

void BenchSchema::insert_pending(int n) { insert_due(n, job_type_, 0); }

void BenchSchema::insert_pending_later(int n, int delay_ms) {
  insert_due(n, job_type_, 0, "default", delay_ms);
}

void BenchSchema::insert_unserved(int n) { insert_due(n, job_type_ + "-unserved", 10); }

void BenchSchema::insert_paused(int n) {
  run([&] {
    pqxx::nontransaction txn(session_->connection());
    txn.exec_params("INSERT INTO " + quote_identifier(schema_) +
                        ".pgjobd_queues (queue, paused) VALUES ($1, true)"
                        " ON CONFLICT (queue) DO UPDATE SET paused = true",
                    std::string(kPausedQueue));
  });
  insert_due(n, job_type_, 10, kPausedQueue);
}

void BenchSchema::insert_due(int n, const std::string& type, int priority, const std::string& queue,
                             int delay_ms) {
  run([&] {
    pqxx::nontransaction txn(session_->connection());
    txn.exec_params("INSERT INTO " + table_ +
                        " (type, priority, queue, run_at, payload)"
                        " SELECT $1, $3, $4, now() + $5::int * interval '1 millisecond',"
                        " jsonb_build_object('n', g) FROM generate_series(1, $2) g",
                    type, n, priority, queue, delay_ms);
  });
}

void BenchSchema::insert_finished(long long n) {
  run([&] {
    pqxx::nontransaction txn(session_->connection());
    txn.exec_params("INSERT INTO " + table_ +
                        " (type, status, attempts, started_at, finished_at)"
                        " SELECT $1, 'done', 1, now(), now() FROM generate_series(1, $2)",
                    job_type_, n);
  });
}

std::map<std::string, std::int64_t> BenchSchema::insert_workflow(const std::string& nodes_json) {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    std::map<std::string, std::int64_t> ids;
    for (const auto& row : txn.exec_params("SELECT ref, id FROM " + quote_identifier(schema_) +
                                               ".pgjobd_enqueue_workflow($1::jsonb)",
                                           nodes_json)) {
      ids.emplace(row[0].as<std::string>(), row[1].as<std::int64_t>());
    }
    return ids;
  });
}

std::int64_t BenchSchema::insert_one() {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    return txn
        .exec_params("INSERT INTO " + table_ + " (type) VALUES ($1) RETURNING id", job_type_)[0][0]
        .as<std::int64_t>();
  });
}

// Each branch is answered by a partial index at the first row it holds; one
// `status IN (pending, failed, running)` matches no index and scanned every finished row
// too (0.4 s at 5M done rows, inside the timing).
bool BenchSchema::any_unfinished() {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    // Of the served type only (insert_unserved's rows stay pending), through
    // jobs_claim_type_idx, without walking those rows. The index's order makes the planner
    // take it. Trap: as a plain EXISTS, planned on statistics that still count the burnt
    // down jobs as pending, it read the whole table (200,000 unserved rows: 25-60 ms per
    // check, inside the timing, a tenth of a 50,000-job burn-down).
    return txn
        .exec_params("SELECT (SELECT 1 FROM " + table_ +
                         " WHERE status IN ('pending', 'failed') AND queue = 'default' AND "
                         "type = $1 ORDER BY priority DESC, run_at, id LIMIT 1) IS NOT NULL"
                         " OR EXISTS (SELECT 1 FROM " +
                         table_ + " WHERE status = 'running')",
                     job_type_)[0][0]
        .as<bool>();
  });
}

int BenchSchema::backend_pid() {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    return txn.exec("SELECT pg_backend_pid()")[0][0].as<int>();
  });
}

std::int64_t BenchSchema::max_id() {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    return txn.exec("SELECT coalesce(max(id), 0) FROM " + table_)[0][0].as<std::int64_t>();
  });
}

std::pair<std::int64_t, std::int64_t> BenchSchema::first_due_ids(int n) {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    // The claim's order on jobs_claim_type_idx: n index entries, whatever the backlog.
    const auto rows = txn.exec_params(
        "SELECT min(id), max(id), count(*) FROM (SELECT id FROM " + table_ +
            " WHERE queue = 'default' AND type = $1 AND status IN ('pending', 'failed')"
            " AND run_at <= now() ORDER BY priority DESC, run_at, id LIMIT $2) f",
        job_type_, n);
    if (rows[0][2].as<int>() < n) return std::pair<std::int64_t, std::int64_t>{0, 0};
    return std::pair{rows[0][0].as<std::int64_t>(), rows[0][1].as<std::int64_t>()};
  });
}

bool BenchSchema::any_unfinished_between(std::int64_t first, std::int64_t last) {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    return txn
        .exec_params("SELECT EXISTS (SELECT 1 FROM " + table_ +
                         " WHERE id BETWEEN $1 AND $2 AND status <> 'done')",
                     first, last)[0][0]
        .as<bool>();
  });
}

bool BenchSchema::first_due_unfinished(std::int64_t first, std::int64_t last) {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    return txn
        .exec_params("SELECT EXISTS (SELECT 1 FROM " + table_ +
                         " WHERE status = 'running' AND id BETWEEN $1 AND $2)"
                         " OR coalesce((SELECT id FROM " +
                         table_ +
                         " WHERE queue = 'default' AND type = $3"
                         " AND status IN ('pending', 'failed') AND run_at <= now()"
                         " ORDER BY priority DESC, run_at, id LIMIT 1) BETWEEN $1 AND $2, false)",
                     first, last, job_type_)[0][0]
        .as<bool>();
  });
}

double BenchSchema::finish_span_seconds(std::int64_t after, std::int64_t upto) {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    return txn
        .exec_params("SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM " +
                         table_ + " WHERE id > $1 AND id < $2",
                     after, upto)[0][0]
        .as<double>();
  });
}

double BenchSchema::start_after_ms(std::int64_t job, std::int64_t after, std::int64_t upto) {
  return run([&] {
    pqxx::nontransaction txn(session_->connection());
    return txn
        .exec_params("SELECT extract(epoch FROM (SELECT started_at FROM " + table_ +
                         " WHERE id = $1) - max(finished_at))::float8 * 1000 FROM " + table_ +
                         " WHERE id > $2 AND id < $3",
                     job, after, upto)[0][0]
        .as<double>();
  });
}

// VACUUM ANALYZE gives fresh statistics and visibility map, as autovacuum would leave a
// table at rest; the CHECKPOINT then writes out the dirty pages and WAL of the bulk load
// before the timed phase rather than during it.
bool BenchSchema::settle() {
  exec("VACUUM ANALYZE " + table_);
  if (!may_checkpoint_) return false;
  try {
    exec("CHECKPOINT");
    return true;
  } catch (const DbError& e) {
    if (e.sqlstate() != "42501") throw;  // insufficient_privilege
    spdlog::warn(
        "bench: CHECKPOINT not allowed for this role (needs superuser or "
        "pg_checkpoint); timed phases may overlap a checkpoint");
    may_checkpoint_ = false;
    return false;
  }
}

}  // namespace pgjobd
