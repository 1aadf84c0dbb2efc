#pragma once
// JobStore over one PostgreSQL session (DbSession): the prepared statements of
// statements.cpp. Failures surface as DbError; the connection is dropped on error and
// reopened on the next call.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "db/db_session.hpp"
#include "store/database.hpp"
#include "store/job_store.hpp"

namespace pqxx {
class result;
class transaction_base;
}  // namespace pqxx

namespace pgjobd {

class PgJobStore final : public JobStore {
 public:
  // role: this connection's purpose, shown in pg_stat_activity ("fetcher", "completer");
  // use: how its statements are planned (StatementSet); session: one already open to use
  // instead of opening one (PgDatabase hands over its start-up session), renamed for
  // `role` and set up when first used, or replaced should the server have closed it.
  PgJobStore(DatabaseConfig config, std::string role, StoreUse use = StoreUse::kOccasional,
             ConnectionPtr session = nullptr);
  ~PgJobStore() override;
  PgJobStore(const PgJobStore&) = delete;
  PgJobStore& operator=(const PgJobStore&) = delete;

  // Opens the connection and prepares statements if not connected. Throws DbError.
  // Every other method calls it first.
  void connect();
  // Opens the connection and sets the session up on another thread; connect() takes it
  // over (or throws what opening it threw).
  void connect_ahead() override;

  std::vector<Job> claim(const ClaimRequest& request) override;
  ClaimWithDue claim_with_due(const ClaimRequest& request,
                              const std::vector<std::string>& due_queues) override;
  LimitedClaim claim_limited(const ClaimRequest& request) override;
  std::vector<Job> claim_ids(const ClaimRequest& request,
                             const std::vector<std::int64_t>& ids) override;
  DueTimes next_due(const std::vector<std::string>& queues, const std::vector<std::string>& types,
                    std::chrono::microseconds look_back) override;
  CompletionReport complete(const std::vector<Completion>& batch, const std::string& worker_id,
                            bool delete_done) override;
  bool run_and_complete(const std::string& sql, const Job& job, const std::string& worker_id,
                        bool delete_done, Millis timeout, std::size_t max_result_bytes,
                        std::stop_token stop) override;
  HeartbeatReport heartbeat(const std::vector<JobAttempt>& jobs, const std::string& worker_id,
                            Millis lease) override;
  RescueReport lead_and_rescue(const std::string& worker_id, Millis leadership_ttl,
                               const RetryConfig& retry, int batch_size) override;
  void resign(const std::string& worker_id) override;
  int prune(const RetentionConfig& retention, int batch_size) override;
  std::vector<QueueStatsRow> queue_stats(const std::vector<std::string>& queues) override;
  std::vector<std::string> paused_queues(const std::vector<std::string>& queues) override;
  std::vector<DeadLetterOverwrite> sync_dead_letters(
      const std::map<std::string, DeadLetterConfig>& dead_letters,
      const std::vector<std::string>& served, const std::string& writer) override;
  LimitSync sync_limits(const std::map<std::string, LimitConfig>& limits,
                        const std::string& writer) override;
  std::vector<LimitDefinition> load_limits() override;
  std::vector<LimitUsage> limit_usage() override;
  int collect_limit_garbage(Millis idle, int batch_size) override;
  int repair_dependencies(int batch_size) override;
  void report_daemon(const DaemonReport& report) override;
  void remove_daemon(const std::string& worker_id) override;
  int expire_daemons() override;
  void announce_finished(const std::vector<std::string>& payloads) override;
  std::string schema_problem() override;

  // Statements sent to the server by every PgJobStore of this process (the benchmark's
  // queries_per_job and idle_queries_per_s).
  static std::uint64_t round_trips();

 private:
  template <typename Fn>
  auto guarded(const char* operation, Fn&& fn);
  CompletionReport write_completions(const std::vector<Completion>& batch,
                                     const std::string& worker_id, bool delete_done);
  // CompletionReport::notify_pid of this session (connected).
  int notify_pid();
  template <typename... Args>
  pqxx::result execute(pqxx::transaction_base& txn, const char* name, Args&&... args);
  // One of the claim statements (kClaim, kClaimWithDue, kClaimIds, kClaimLimited) in `txn`:
  // the request as $1..$8, then `more`.
  template <typename... More>
  pqxx::result run_claim(pqxx::transaction_base& txn, const char* name, const ClaimRequest& request,
                         More&&... more);

  DatabaseConfig config_;
  DbSession session_;
  // Where prune()'s next slice starts (finished_at as timestamptz text, per branch), so a
  // backlog is read once rather than once per slice; back to the start after a short one.
  static constexpr const char* kPruneFromStart = "-infinity";
  std::string prune_done_from_ = kPruneFromStart;
  std::string prune_dead_from_ = kPruneFromStart;
  // The ids the last complete() found held by another session (write_completions).
  std::vector<std::int64_t> held_ids_;
};

}  // namespace pgjobd
