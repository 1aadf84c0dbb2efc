// PgJobStore: the prepared statements of statements.cpp executed over one connection.

#include "db/pg_job_store.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string_view>

#include "db/connection.hpp"
#include "db/field_values.hpp"
#include "db/migrator.hpp"
#include "db/row_json.hpp"
#include "db/sql_text.hpp"
#include "db/statements.hpp"
#include "log/logging.hpp"
#include "text/result_json.hpp"

namespace pgjobd {
namespace {

const char* status_for(Outcome outcome) {
  switch (outcome) {
    case Outcome::kDone:
      return "done";
    case Outcome::kRetry:
      return "failed";
    case Outcome::kDead:
      return "dead";
    case Outcome::kReleased:
      return "pending";
    case Outcome::kCancelled:
      return "cancelled";
  }
  return "failed";
}

// Counts statements sent, across all PgJobStores (relaxed: a statistic, not a guard).
std::atomic<std::uint64_t> g_round_trips{0};

void count_round_trip(std::uint64_t n = 1) {
  g_round_trips.fetch_add(n, std::memory_order_relaxed);
}

// pg_type OIDs of the sql handler's parameters: $1 jsonb (the payload), $2 bigint (job id).

}  // namespace

std::uint64_t PgJobStore::round_trips() { return g_round_trips.load(std::memory_order_relaxed); }

// Every call runs under database.call_timeout (DbSession::call).
template <typename Fn>
auto PgJobStore::guarded(const char* operation, Fn&& fn) {
  return session_.call(operation, std::forward<Fn>(fn));
}

PgJobStore::PgJobStore(DatabaseConfig config, std::string role, StoreUse use, ConnectionPtr session)
    : config_(std::move(config)),
      session_(config_, std::move(role), stmt::job_statements(quote_identifier(config_.schema)),
               use == StoreUse::kHotPath ? Planning::kPinned : Planning::kEachExecution,
               std::move(session)) {}

PgJobStore::~PgJobStore() = default;

void PgJobStore::connect() { session_.connect(); }

void PgJobStore::connect_ahead() { session_.connect_ahead(); }

template <typename... Args>
pqxx::result PgJobStore::execute(pqxx::transaction_base& txn, const char* name, Args&&... args) {
  return session_.execute(txn, name, std::forward<Args>(args)...);
}

namespace {

// A claimed job from the claim's columns 0..8, read in order through one column
// iterator: each row[i] is a pqxx::field holding its own copy of the result's handles,
// reference counts taken and dropped for every column of every claimed job.
Job job_from_row(const pqxx::row& row) {
  auto column = row.begin();
  Job job;
  job.id = column->as<std::int64_t>();
  job.queue = (++column)->c_str();
  job.type = (++column)->c_str();
  const bool payload_read = !(++column)->is_null();
  if (payload_read) {
    job.payload = column->c_str();
  } else {
    job.payload.clear();  // over request.max_payload_bytes: not read
  }
  job.attempt = (++column)->as<int>();
  job.max_attempts = (++column)->as<int>();
  job.priority = (++column)->as<int>();
  job.queue_wait_seconds = field_as_double(++column);
  if (!payload_read) job.oversized_payload_bytes = (++column)->as<std::int64_t>();
  return job;
}

// The wait until a job not due yet, from seconds: rounded up, since waking a microsecond
// early finds the job not yet due.
std::chrono::microseconds due_in(double seconds) {
  return std::chrono::microseconds(static_cast<std::int64_t>(std::ceil(seconds * 1e6)));
}

// The top node's row estimate in an EXPLAIN (FORMAT JSON) output; 0 if it has none.
double planned_rows(const char* explain_json) {
  const nlohmann::json plan = nlohmann::json::parse(explain_json, nullptr, false);
  if (!plan.is_array() || plan.empty() || !plan[0].is_object()) return 0;
  const auto top = plan[0].find("Plan");
  if (top == plan[0].end() || !top->is_object()) return 0;
  const auto rows = top->find("Plan Rows");
  return rows != top->end() && rows->is_number() ? rows->get<double>() : 0;
}

std::vector<std::string> json_text_list(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& item : nlohmann::json::parse(text)) out.push_back(item.get<std::string>());
  return out;
}

}  // namespace

template <typename... More>
pqxx::result PgJobStore::run_claim(pqxx::transaction_base& txn, const char* name,
                                   const ClaimRequest& request, More&&... more) {
  std::vector<std::string> queues;
  std::vector<std::int64_t> free;
  for (const auto& s : request.slots) {
    queues.push_back(s.queue);
    free.push_back(s.free);
  }
  count_round_trip();
  return execute(txn, name, text_array_literal(queues), int_array_literal(free),
                 text_array_literal(request.types), request.limit, request.worker_id,
                 static_cast<std::int64_t>(request.lease.count()),
                 config_.synchronous_claims ? "" : "off", request.max_payload_bytes,
                 std::forward<More>(more)...);
}

namespace {

// The jobs of a plain claim (kClaim, kClaimIds); nothing when it found a limit (its row of
// NULLs).
std::optional<std::vector<Job>> plain_claim_jobs(const pqxx::result& rows) {
  std::vector<Job> jobs;
  jobs.reserve(rows.size());
  for (const auto& row : rows) {
    if (row[0].is_null()) return std::nullopt;
    jobs.push_back(job_from_row(row));
  }
  return jobs;
}

}  // namespace

std::vector<Job> PgJobStore::claim(const ClaimRequest& request) {
  connect();
  std::optional<std::vector<Job>> jobs = guarded("claim", [&] {
    pqxx::nontransaction txn(session_.connection());  // one statement: atomic on its own
    return plain_claim_jobs(run_claim(txn, stmt::kClaim, request));
  });
  if (!jobs) throw LimitsExist();
  return std::move(*jobs);
}

ClaimWithDue PgJobStore::claim_with_due(const ClaimRequest& request,
                                        const std::vector<std::string>& due_queues) {
  // Behind a transaction pooler every statement is planned at each execution, and the
  // plain claim plans in half the time: the fetcher asks next_due when it needs to.
  if (session_.transaction_pooler()) return {claim(request), std::nullopt};
  connect();
  bool limited = false;
  ClaimWithDue claim = guarded("claim", [&] {
    pqxx::nontransaction txn(session_.connection());  // one statement: atomic on its own
    const pqxx::result rows =
        run_claim(txn, stmt::kClaimWithDue, request, text_array_literal(due_queues));
    ClaimWithDue answer;
    answer.jobs.reserve(rows.size());
    for (const auto& row : rows) {
      if (!row[0].is_null()) {
        answer.jobs.push_back(job_from_row(row));
        continue;
      }
      // The statement's last row: the short claim's answer, and whether a limit exists.
      limited = row[10].as<bool>();
      DueTimes due;
      if (!row[9].is_null()) due.next_in = due_in(field_as_double(row[9]));
      answer.due = due;
    }
    return answer;
  });
  if (limited) throw LimitsExist();
  return claim;
}

std::vector<Job> PgJobStore::claim_ids(const ClaimRequest& request,
                                       const std::vector<std::int64_t>& ids) {
  connect();
  std::optional<std::vector<Job>> jobs = guarded("claim", [&] {
    pqxx::nontransaction txn(session_.connection());  // one statement: atomic on its own
    return plain_claim_jobs(run_claim(txn, stmt::kClaimIds, request, int_array_literal(ids)));
  });
  if (!jobs) throw LimitsExist();
  return std::move(*jobs);
}

LimitedClaim PgJobStore::claim_limited(const ClaimRequest& request) {
  connect();
  return guarded("claim", [&] {
    const auto told = [](int n) { return n < 0 ? std::nullopt : std::optional<int>(n); };
    const auto limited = [&](pqxx::transaction_base& txn) {
      // A function call.
      const pqxx::result rows = run_claim(txn, stmt::kClaimLimited, request,
                                          told(request.startable), told(request.own_running));
      LimitedClaim claim;
      claim.jobs.reserve(rows.size());
      for (const auto& row : rows) {
        if (!row[0].is_null()) {
          claim.jobs.push_back(job_from_row(row));
          continue;
        }
        LimitHold hold{row[9].c_str(), row[10].c_str(), std::nullopt};
        if (!row[11].is_null()) {
          // Rounded up: waking a microsecond early finds no token yet.
          hold.retry_in = std::chrono::microseconds(
              static_cast<std::int64_t>(std::ceil(std::max(field_as_double(row[11]), 0.0) * 1e6)));
        }
        claim.held.push_back(std::move(hold));
      }
      return claim;
    };
    if (!request.one_concurrency_limit) {
      pqxx::nontransaction txn(session_.connection());  // one statement: atomic on its own
      return limited(txn);
    }
    // The limit's room, its lock held until the commit, then the plain claim cut at it; or,
    // when the room says nothing (no row: sql/functions/pgjobd_claim_room.sql), the limited
    // claim in the same transaction.
    pqxx::work txn(session_.connection());
    std::vector<std::string> queues;
    for (const auto& s : request.slots) queues.push_back(s.queue);
    count_round_trip(2);  // BEGIN, the room
    const pqxx::result room =
        execute(txn, stmt::kClaimRoom, text_array_literal(queues),
                text_array_literal(request.types), request.worker_id, told(request.own_running));
    LimitedClaim claim;
    if (room.empty()) {
      claim = limited(txn);
    } else {
      const int n = room[0][1].as<int>();
      ClaimRequest cut = request;
      cut.limit = std::min(cut.limit, n);
      for (QueueSlots& slot : cut.slots) slot.free = std::min(slot.free, n);
      const pqxx::result rows = run_claim(txn, stmt::kClaimInRoom, cut);
      claim.jobs.reserve(rows.size());
      for (const auto& row : rows) claim.jobs.push_back(job_from_row(row));
      // The room ran out before the claim did: the limit held it back, as the limited
      // claim reports it (a completion is what makes room).
      if (n < request.limit && static_cast<int>(claim.jobs.size()) >= n) {
        claim.held.push_back({room[0][0].c_str(), "concurrency", std::nullopt});
      }
    }
    count_round_trip();
    txn.commit();
    return claim;
  });
}

LimitSync PgJobStore::sync_limits(const std::map<std::string, LimitConfig>& limits,
                                  const std::string& writer) {
  connect();
  return guarded("limits sync", [&] {
    nlohmann::json definitions = nlohmann::json::object();
    for (const auto& [name, limit] : limits) {
      nlohmann::json& d = definitions[name];
      d["types"] = limit.types.empty() ? nlohmann::json() : nlohmann::json(limit.types);
      d["queues"] = limit.queues.empty() ? nlohmann::json() : nlohmann::json(limit.queues);
      d["key"] = limit.key.empty() ? nlohmann::json() : nlohmann::json(limit.key);
      d["concurrency"] =
          limit.concurrency > 0 ? nlohmann::json(limit.concurrency) : nlohmann::json();
      d["rate_per_second"] =
          limit.rate_per_second > 0 ? nlohmann::json(limit.rate_per_second) : nlohmann::json();
      d["rate_text"] = limit.rate.empty() ? nlohmann::json() : nlohmann::json(limit.rate);
      d["burst"] = limit.burst;
    }
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    LimitSync sync;
    for (const auto& row : execute(txn, stmt::kLimitsSync, definitions.dump(), writer)) {
      if (row[0].is_null()) {
        sync.busy = row[2].c_str();  // (NULL, 'busy', what holds the lock): nothing written
      } else {
        sync.changes.push_back({row[0].c_str(), row[1].c_str(), row[2].c_str()});
      }
    }
    return sync;
  });
}

std::vector<LimitDefinition> PgJobStore::load_limits() {
  connect();
  return guarded("limits load", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    std::vector<LimitDefinition> out;
    for (const auto& row : execute(txn, stmt::kLimitsLoad)) {
      LimitDefinition d;
      d.name = row[0].c_str();
      d.limit.types = json_text_list(row[1].c_str());
      d.limit.queues = json_text_list(row[2].c_str());
      d.limit.key = row[3].c_str();
      d.limit.concurrency = row[4].as<int>();
      d.limit.rate_per_second = row[5].as<double>();
      d.limit.burst = row[6].as<int>();
      d.written_by = row[7].c_str();
      out.push_back(std::move(d));
    }
    return out;
  });
}

std::vector<LimitUsage> PgJobStore::limit_usage() {
  connect();
  return guarded("limits usage", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    std::vector<LimitUsage> out;
    for (const auto& row : execute(txn, stmt::kLimitUsage)) {
      out.push_back({row[0].c_str(), row[1].as<std::int64_t>(), row[2].as<std::int64_t>()});
    }
    return out;
  });
}

int PgJobStore::collect_limit_garbage(Millis idle, int batch_size) {
  connect();
  return guarded("limits cleanup", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    const auto rows =
        execute(txn, stmt::kLimitGarbage, static_cast<std::int64_t>(idle.count()), batch_size);
    return rows[0][0].as<int>();
  });
}

int PgJobStore::repair_dependencies(int batch_size) {
  connect();
  return guarded("dependency repair", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    return execute(txn, stmt::kRepairDependencies, batch_size)[0][0].as<int>();
  });
}

CompletionReport PgJobStore::complete(const std::vector<Completion>& batch,
                                      const std::string& worker_id, bool delete_done) {
  return write_completions(batch, worker_id, delete_done);
}

namespace {

// The longest a completion batch waits for a row lock another session holds before it is
// sent again skipping held rows (statements.cpp, kCompleteLockCte). Longer than a row
// lock of the daemon's own statements lasts (a heartbeat of 1,000 rows: a few ms), short
// beside a batch's flush delay and a lease.
constexpr const char* kCompletionLockWait = "50ms";

}  // namespace

CompletionReport PgJobStore::write_completions(const std::vector<Completion>& batch,
                                               const std::string& worker_id, bool delete_done) {
  connect();
  return guarded("complete", [&] {
    std::vector<std::int64_t> done_ids, done_attempts;
    std::vector<std::string> done_results;
    bool any_result = false;
    std::vector<std::int64_t> other_ids, other_attempts, other_delays;
    std::vector<std::string> other_statuses, other_errors;
    for (const Completion& c : batch) {
      if (c.outcome == Outcome::kDone) {
        done_ids.push_back(c.job.id);
        done_attempts.push_back(c.job.attempt);
        done_results.push_back(c.result);
        any_result = any_result || !c.result.empty();
      } else {
        other_ids.push_back(c.job.id);
        other_attempts.push_back(c.job.attempt);
        other_statuses.emplace_back(status_for(c.outcome));
        other_errors.push_back(sanitize_text(c.error));
        other_delays.push_back(c.retry_delay.count());
      }
    }
    // The done rows' common attempt, or 0 when they differ (statements.cpp, kCompleteDoneCte).
    std::int64_t common_attempt = done_attempts.empty() ? 0 : done_attempts.front();
    for (const std::int64_t attempt : done_attempts) {
      if (attempt != common_attempt) common_attempt = 0;
    }
    const std::string done_id_array = int_array_literal(done_ids);
    const std::string done_attempt_array = int_array_literal(done_attempts);
    const std::string other_id_array = int_array_literal(other_ids);
    const std::string other_attempt_array = int_array_literal(other_attempts);
    const std::string status_array = text_array_literal(other_statuses);
    const std::string error_array = text_array_literal(other_errors);
    const std::string delay_array = int_array_literal(other_delays);
    // NULL when no done row has a result (statements.cpp, kCompleteDoneCte); none is kept
    // when done rows are deleted.
    const std::optional<std::string> result_array =
        any_result && !delete_done ? std::optional(nullable_array_literal(done_results))
                                   : std::nullopt;
    CompletionReport report;
    // A row held at the last call is likely held still: a batch holding one (the
    // completer's retry of held rows) skips the wait.
    const bool held_before = std::any_of(batch.begin(), batch.end(), [&](const Completion& c) {
      return std::find(held_ids_.begin(), held_ids_.end(), c.job.id) != held_ids_.end();
    });
    held_ids_.clear();
    if (!held_before) {
      try {
        pqxx::nontransaction txn(session_.connection());  // one statement: atomic on its own
        count_round_trip();
        const auto rows = execute(txn, delete_done ? stmt::kCompleteDeleteDone : stmt::kComplete,
                                  done_id_array, done_attempt_array, other_id_array,
                                  other_attempt_array, status_array, error_array, delay_array,
                                  worker_id, common_attempt, result_array, kCompletionLockWait);
        report.written = rows[0][0].as<int>();
        report.stale = static_cast<int>(batch.size()) - report.written;
        if (!delete_done) {  // kComplete: the children it counted to 0 (statements.hpp)
          report.unblocked = parse_bigint_array({rows[0][1].c_str(), rows[0][1].size()})
                                 .value_or(std::vector<std::int64_t>{});
          report.other_due = rows[0][2].as<bool>();
          report.notify_pid = notify_pid();
        }
        return report;
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != "55P03") throw;  // lock_not_available: nothing was written
      }
    }
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    const auto rows =
        execute(txn, delete_done ? stmt::kCompleteDeleteDoneSkipLocked : stmt::kCompleteSkipLocked,
                done_id_array, done_attempt_array, other_id_array, other_attempt_array,
                status_array, error_array, delay_array, worker_id, common_attempt, result_array);
    for (const auto& row : rows) {
      if (!row[0].is_null()) {
        report.written = row[0].as<int>();
        continue;
      }
      const auto id = row[1].as<std::int64_t>();
      const auto held = std::find_if(batch.begin(), batch.end(),
                                     [&](const Completion& c) { return c.job.id == id; });
      if (held != batch.end()) report.held.push_back(held->job);
      held_ids_.push_back(id);
    }
    report.stale =
        static_cast<int>(batch.size()) - report.written - static_cast<int>(report.held.size());
    // The row triggers resolved the children (kCompleteSkipLocked has no `counted`).
    report.other_due = !delete_done;
    report.notify_pid = delete_done ? 0 : notify_pid();
    return report;
  });
}

int PgJobStore::notify_pid() {
  // Behind a transaction pooler the next statement may run in another server process, and
  // the process id the session was given is the pooler's to choose.
  return session_.transaction_pooler() ? 0 : session_.connection().backendpid();
}

bool PgJobStore::run_and_complete(const std::string& sql, const Job& job,
                                  const std::string& worker_id, bool delete_done, Millis timeout,
                                  std::size_t max_result_bytes, std::stop_token stop) {
  connect();
  // The handler's own statement may run as long as its `timeout` allows (none: as long as
  // it takes; the TCP settings still notice a dead server); the completion and commit
  // after it get the usual bound.
  const Millis bound = timeout.count() > 0 && config_.call_timeout.count() > 0
                           ? timeout + config_.call_timeout
                           : Millis(0);
  return session_.call(
      "sql handler", bound,
      [&] {
        pqxx::connection_base& conn = session_.connection();
        // PQcancel is safe from another thread: a drain or a lost lease stops the statement.
        std::stop_callback cancel(stop, [&conn] { conn.cancel_query(); });
        pqxx::work txn(conn);
        count_round_trip(4);  // BEGIN, the statement, the completion, COMMIT
        if (timeout.count() > 0) {
          txn.exec_params("SELECT set_config('statement_timeout', $1, true)",
                          std::to_string(timeout.count()) + "ms");
          count_round_trip();
        }
        // Always both parameters, typed: the server cannot infer the type of one the statement
        // leaves unused, and libpqxx 6.4 sends no types. exec_typed uses the extended protocol,
        // so the text is exactly one statement: a `; COMMIT; ...` cannot end this transaction.
        const PgResult returned =
            exec_typed(conn, sql, {{kJsonbOid, job.payload}, {kInt8Oid, std::to_string(job.id)}});
        std::optional<std::string> result;  // NULL: none (or a deleted row: none kept)
        if (!delete_done && max_result_bytes > 0) {
          // One byte over the bound tells stored_result the rows were longer.
          HeadBuffer json = rows_json(*returned, max_result_bytes + 1);
          const std::size_t bytes = json.total();
          std::string stored =
              stored_result(json.take(), ResultFormat::kJson, bytes, max_result_bytes);
          if (!stored.empty()) result = std::move(stored);
        }
        const auto rows =
            execute(txn, delete_done ? stmt::kCompleteOneDelete : stmt::kCompleteOneDone, job.id,
                    job.attempt, worker_id, result);
        if (rows.empty()) {
          txn.abort();  // not ours any more: the statement's effects must not count
          return false;
        }
        txn.commit();
        return true;
      },
      /*shortenable=*/false);
}

HeartbeatReport PgJobStore::heartbeat(const std::vector<JobAttempt>& jobs,
                                      const std::string& worker_id, Millis lease) {
  connect();
  return guarded("heartbeat", [&] {
    // One attempt per id, the latest: a job rescued and claimed again while its earlier
    // attempt's completion still waits comes with both, and the statement matches an id to
    // one attempt (array_position finds the first); the earlier one is not ours any more,
    // and the current one, matched to it, was taken for lost and stopped.
    std::map<std::int64_t, int> latest;
    for (const JobAttempt& job : jobs) {
      const auto [at, added] = latest.emplace(job.id, job.attempt);
      if (!added) at->second = std::max(at->second, job.attempt);
    }
    std::vector<std::int64_t> ids, attempts;
    ids.reserve(latest.size());
    attempts.reserve(latest.size());
    for (const auto& [id, attempt] : latest) {
      ids.push_back(id);
      attempts.push_back(attempt);
    }
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    const auto rows =
        execute(txn, stmt::kHeartbeat, int_array_literal(ids), int_array_literal(attempts),
                worker_id, static_cast<std::int64_t>(lease.count()));
    HeartbeatReport report;
    report.kept.reserve(rows.size());
    for (const auto& row : rows) {
      const JobAttempt job{row[0].as<std::int64_t>(), row[1].as<int>()};
      (row[3].as<bool>() ? report.kept : report.held).push_back(job);
      if (row[2].as<bool>()) report.cancel_requested.push_back(job);
    }
    return report;
  });
}

RescueReport PgJobStore::lead_and_rescue(const std::string& worker_id, Millis leadership_ttl,
                                         const RetryConfig& retry, int batch_size) {
  connect();
  return guarded("rescue", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    const auto rows = execute(
        txn, stmt::kLeadAndRescue, worker_id, static_cast<std::int64_t>(leadership_ttl.count()),
        static_cast<double>(retry.base.count()), static_cast<double>(retry.max_delay.count()),
        retry.jitter, batch_size);
    return RescueReport{rows[0][0].as<bool>(), rows[0][1].as<int>(), rows[0][2].as<int>(),
                        rows[0][3].as<int>()};
  });
}

void PgJobStore::resign(const std::string& worker_id) {
  connect();
  guarded("resign", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    execute(txn, stmt::kResign, worker_id);
    return 0;
  });
}

int PgJobStore::prune(const RetentionConfig& retention, int batch_size) {
  connect();
  return guarded("prune", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    const auto rows = execute(txn, stmt::kPrune, static_cast<std::int64_t>(retention.done.count()),
                              static_cast<std::int64_t>(retention.dead.count()), prune_done_from_,
                              prune_dead_from_, batch_size);
    const int deleted = rows[0][0].as<int>();
    if (deleted < batch_size) {
      // This pass is over: the next one starts from the oldest rows again, for any it
      // skipped (locked) or that were written with an earlier finished_at meanwhile.
      prune_done_from_ = prune_dead_from_ = kPruneFromStart;
    } else {
      prune_done_from_ = rows[0][1].as<std::string>();
      prune_dead_from_ = rows[0][2].as<std::string>();
    }
    return deleted;
  });
}

DueTimes PgJobStore::next_due(const std::vector<std::string>& queues,
                              const std::vector<std::string>& types,
                              std::chrono::microseconds look_back) {
  connect();
  return guarded("next due", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    const auto rows =
        execute(txn, stmt::kNextDue, text_array_literal(queues), text_array_literal(types),
                static_cast<std::int64_t>(std::max(look_back.count(), std::int64_t{0})));
    DueTimes due;
    if (rows.empty()) return due;
    if (!rows[0][0].is_null()) due.next_in = due_in(field_as_double(rows[0][0]));
    // Rounded down: a job that may have come due after the claim looked counts as such.
    if (!rows[0][1].is_null()) {
      due.last_due_ago = std::chrono::microseconds(
          static_cast<std::int64_t>(std::floor(field_as_double(rows[0][1]) * 1e6)));
    }
    return due;
  });
}

std::vector<QueueStatsRow> PgJobStore::queue_stats(const std::vector<std::string>& queues) {
  connect();
  return guarded("stats", [&] {
    pqxx::read_transaction txn(session_.connection());
    count_round_trip();
    execute(txn, stmt::kQueueStatsPlanning);
    count_round_trip();
    std::vector<QueueStatsRow> out;
    for (const auto& row : execute(txn, stmt::kQueueStats, text_array_literal(queues),
                                   static_cast<std::int64_t>(kQueueDepthCounted))) {
      out.push_back({row[0].c_str(), row[1].c_str(), row[2].as<double>(), row[3].as<double>()});
    }
    // A group too large to count: the planner's estimate, never below what was counted.
    for (auto& row : out) {
      if (row.count < static_cast<double>(kQueueDepthCounted)) continue;
      count_round_trip();
      const auto estimate =
          planned_rows(txn.exec_params(stmt::queue_depth_estimate(quote_identifier(config_.schema)),
                                       row.queue, row.status)[0][0]
                           .c_str());
      row.count = std::max(row.count, estimate);
    }
    txn.commit();
    return out;
  });
}

std::vector<std::string> PgJobStore::paused_queues(const std::vector<std::string>& queues) {
  connect();
  return guarded("stats", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    std::vector<std::string> out;
    for (const auto& row : execute(txn, stmt::kPausedQueues, text_array_literal(queues))) {
      out.emplace_back(row[0].c_str());
    }
    return out;
  });
}

std::vector<DeadLetterOverwrite> PgJobStore::sync_dead_letters(
    const std::map<std::string, DeadLetterConfig>& dead_letters,
    const std::vector<std::string>& served, const std::string& writer) {
  connect();
  return guarded("dead letters", [&] {
    nlohmann::json wanted = nlohmann::json::object();
    for (const auto& [type, target] : dead_letters) {
      nlohmann::json& row = wanted[type];
      row["type"] = target.type;
      row["queue"] = target.queue.empty() ? nlohmann::json() : nlohmann::json(target.queue);
    }
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    std::vector<DeadLetterOverwrite> out;
    for (const auto& row :
         execute(txn, stmt::kDeadLettersSync, wanted.dump(), text_array_literal(served), writer)) {
      out.push_back(
          {row[0].c_str(), row[1].c_str(), {row[2].c_str(), row[3].c_str()}, row[4].c_str()});
    }
    return out;
  });
}

void PgJobStore::report_daemon(const DaemonReport& report) {
  connect();
  guarded("daemon report", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    execute(txn, stmt::kDaemonReport, report.id, report.host, report.pid, report.version,
            report.concurrency, report.busy, static_cast<std::int64_t>(report.ttl.count()));
    return 0;
  });
}

void PgJobStore::remove_daemon(const std::string& worker_id) {
  connect();
  guarded("daemon remove", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    execute(txn, stmt::kDaemonRemove, worker_id);
    return 0;
  });
}

int PgJobStore::expire_daemons() {
  connect();
  return guarded("daemon expiry", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    return execute(txn, stmt::kDaemonExpire)[0][0].as<int>();
  });
}

void PgJobStore::announce_finished(const std::vector<std::string>& payloads) {
  connect();
  guarded("notify finished", [&] {
    pqxx::nontransaction txn(session_.connection());
    count_round_trip();
    execute(txn, stmt::kNotifyFinished, text_array_literal(payloads));
    return 0;
  });
}

std::string PgJobStore::schema_problem() {
  connect();
  return guarded("schema check", [&] {
    count_round_trip(3);  // read-only transaction with two queries
    return pgjobd::schema_problem(session_.connection(), config_.schema);
  });
}

}  // namespace pgjobd
