#pragma once
// UiStore over PostgreSQL (README "Dashboard"): the dashboard's reads and actions on one
// connection of its own, with the SQL of ui_statements.cpp.
//
// Thread-safe: the web server calls from several threads, and one store serves them all
// (a mutex serializes the calls on its one connection), so the overview's cache is shared
// by every browser: however many are open, the counts cost one query per cache_ttl.
// Every read runs in a READ ONLY transaction with SET LOCAL statement_timeout and jit off
// (JIT compiles these short queries for longer than they run: 650 ms against 10 ms for the
// overview next to 5M rows). Every action calls the SQL interface's function and inserts
// its audit row in one transaction. Statements are sent unnamed (ui_statements.hpp says
// why), which also suits a transaction pooler (database.pooler). The connection is dropped
// on error and reopened on the next call, not sooner than a backoff after a failed connect
// (DbSession::back_off_reconnects): page loads are not paced by a loop.

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "db/db_session.hpp"
#include "db/ui/ui_statements.hpp"
#include "pgjobd/config.hpp"
#include "ui/ui_store.hpp"

namespace pqxx {
class transaction_base;
}  // namespace pqxx

namespace pgjobd {

struct UiStoreOptions {
  // Bounds every statement of the dashboard: a slow page fails rather than loads the
  // database.
  std::chrono::milliseconds statement_timeout{2000};
  // How long overview() answers from its cache. Actions clear it.
  std::chrono::milliseconds cache_ttl{2000};
  // Counts stop here (ui::BoundedCount). Done counts come from the newest count_bound + 1
  // done rows (no index holds done rows by queue): beyond that, "at least".
  std::int64_t count_bound = 10000;
  // A job list page that done jobs may match (status done, or none with a queue or type)
  // looks at this many jobs at most, newest first; one with a rare queue or type may then hold
  // fewer jobs than asked for, or none, and still have a next page (ui_statements.cpp says why).
  std::int64_t page_scan = 10000;
};

class PgUiStore final : public ui::UiStore {
 public:
  explicit PgUiStore(DatabaseConfig config, UiStoreOptions options = {});
  ~PgUiStore() override;
  PgUiStore(const PgUiStore&) = delete;
  PgUiStore& operator=(const PgUiStore&) = delete;

  void ping() override;
  ui::Overview overview() override;
  ui::JobPage jobs(const ui::JobFilter& filter) override;
  std::optional<ui::JobDetail> job(std::int64_t id, bool with_payload) override;
  std::vector<ui::QueueInfo> queues() override;
  std::vector<ui::LimitInfo> limits() override;
  std::vector<ui::ScheduleInfo> schedules() override;
  std::vector<ui::AuditEntry> audit(int limit) override;

  ui::ActionResult retry(const std::vector<std::int64_t>& ids, const ui::Actor& actor) override;
  ui::ActionResult cancel(const std::vector<std::int64_t>& ids, const std::string& reason,
                          const ui::Actor& actor) override;
  ui::ActionResult pause_queue(const std::string& queue, const ui::Actor& actor) override;
  ui::ActionResult resume_queue(const std::string& queue, const ui::Actor& actor) override;
  ui::ActionResult pause_schedule(const std::string& name, const ui::Actor& actor) override;
  ui::ActionResult resume_schedule(const std::string& name, const ui::Actor& actor) override;

  // Statements sent since construction (for the tests of the cache).
  std::uint64_t statements_sent() const;

 private:
  // Runs fn(txn) in a READ ONLY transaction (read) or a read-write one (write) under the
  // timeout, with the mutex held; libpqxx errors become DbError.
  template <typename Fn>
  auto read(const char* operation, Fn&& fn);
  template <typename Fn>
  auto write(const char* operation, Fn&& fn);
  template <typename Txn, typename Fn>
  auto run(const char* operation, Fn&& fn);
  ui::ActionResult queue_action(const std::string& queue, bool pause, const ui::Actor& actor);
  ui::ActionResult schedule_action(const std::string& name, bool pause, const ui::Actor& actor);
  std::vector<ui::MinuteBucket> last_hour(pqxx::transaction_base& txn);

  const UiStoreOptions options_;
  const stmt::UiStatements sql_;

  mutable std::mutex mutex_;  // guards everything below
  DbSession session_;
  std::uint64_t sent_ = 0;
  std::optional<ui::Overview> cached_;
  std::chrono::steady_clock::time_point cached_at_;
  // Minutes of the throughput chart that are over (and a minute more, for late commits):
  // read once, kept while they are in the last hour.
  std::map<std::int64_t, ui::MinuteBucket> final_minutes_;
};

}  // namespace pgjobd
