// PgUiStore against PostgreSQL: bounded counts and their cache, the throughput chart, the
// daemons table, keyset job pages and filters, one job with its attempts, every action with
// its audit row, and the statement_timeout. UiStoreBench (PGJOBD_UI_BENCH_ROWS) measures
// the pages next to millions of done rows and checks their plans.
#include "db/ui/pg_ui_store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "db/pg_job_store.hpp"
#include "db/sql_text.hpp"
#include "db/ui/ui_statements.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using namespace std::chrono_literals;
using testing::TestSchema;

const ui::Actor kAlice{"alice", "192.0.2.7"};

UiStoreOptions options(std::chrono::milliseconds cache_ttl,
                       std::chrono::milliseconds statement_timeout = 2000ms) {
  UiStoreOptions o;
  o.cache_ttl = cache_ttl;
  o.statement_timeout = statement_timeout;
  return o;
}

ui::JobFilter where(std::optional<std::string> status, std::optional<std::string> queue = {},
                    std::optional<std::string> type = {}) {
  ui::JobFilter filter;
  filter.status = std::move(status);
  filter.queue = std::move(queue);
  filter.type = std::move(type);
  return filter;
}

ui::JobFilter before(ui::JobFilter filter, std::int64_t id) {
  filter.before_id = id;
  return filter;
}

const ui::QueueOverview* find_queue(const ui::Overview& overview, const std::string& queue) {
  for (const auto& q : overview.queues) {
    if (q.queue == queue) return &q;
  }
  return nullptr;
}

// Inserts `n` rows of `status` in `queue` in one statement, finished `finished_ago` ago
// when the status is a finished one.
void insert_rows(TestSchema& schema, const std::string& queue, const std::string& status, int n,
                 const std::string& type = "work", const std::string& finished_ago = "0 s") {
  const bool finished = status == "done" || status == "dead" || status == "cancelled";
  const bool running = status == "running";
  schema.exec(
      "INSERT INTO {jobs} (queue, type, status, attempts, finished_at, locked_by, "
      "locked_until, started_at, last_error) SELECT '" +
      queue + "', '" + type + "', '" + status + "', " + (status == "pending" ? "0" : "1") + ", " +
      (finished ? "now() - interval '" + finished_ago + "'" : "NULL") + ", " +
      (running ? "'w1'" : "NULL") + ", " + (running ? "now() + interval '1 h'" : "NULL") + ", " +
      (running ? "now()" : "NULL") + ", " +
      (status == "dead" || status == "failed" ? "'boom'" : "NULL") + " FROM generate_series(1, " +
      std::to_string(n) + ")");
}

// The dashboard's /readyz: the database answers and holds the schema, else DbError.
TEST(UiStore, PingAnswersOnlyWhereTheSchemaIs) {
  TestSchema schema;
  PgUiStore store(schema.config().database);
  EXPECT_NO_THROW(store.ping());
  DatabaseConfig elsewhere = schema.config().database;
  elsewhere.schema = schema.name() + "_missing";
  PgUiStore missing(elsewhere);
  EXPECT_THROW(missing.ping(), DbError);
}

TEST(UiStore, OverviewCountsEveryQueueAndStatusUpToTheBound) {
  TestSchema schema;
  insert_rows(schema, "default", "pending", 3);
  insert_rows(schema, "default", "running", 2);
  insert_rows(schema, "default", "failed", 1);
  insert_rows(schema, "default", "dead", 4);
  insert_rows(schema, "default", "cancelled", 5);
  insert_rows(schema, "big", "done", 10005);
  insert_rows(schema, "waiting", "blocked", 2);  // a queue known from its blocked jobs alone
  schema.exec("SELECT " + schema.qualified("pgjobd_pause_queue") + "('idle')");
  PgUiStore store(schema.config().database);
  const ui::Overview overview = store.overview();
  ASSERT_EQ(overview.queues.size(), 4u);
  const auto* d = find_queue(overview, "default");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->pending, (ui::BoundedCount{3, false}));
  EXPECT_EQ(d->running, (ui::BoundedCount{2, false}));
  EXPECT_EQ(d->failed, (ui::BoundedCount{1, false}));
  // Done counts come from the newest 10,001 done rows, all of queue "big" here: for
  // "default", at least none.
  EXPECT_EQ(d->done, (ui::BoundedCount{0, true}));
  EXPECT_EQ(d->dead, (ui::BoundedCount{4, false}));
  EXPECT_EQ(d->cancelled, (ui::BoundedCount{5, false}));
  EXPECT_GE(d->oldest_due_age_seconds, 0);
  EXPECT_FALSE(d->paused);
  const auto* big = find_queue(overview, "big");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->done, (ui::BoundedCount{10000, true}));  // 10,005 rows: "10,000+"
  const auto* idle = find_queue(overview, "idle");        // known from pgjobd_queues alone
  ASSERT_NE(idle, nullptr);
  EXPECT_TRUE(idle->paused);
  EXPECT_EQ(idle->pending, (ui::BoundedCount{0, false}));
  const auto* waiting = find_queue(overview, "waiting");
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(waiting->blocked, (ui::BoundedCount{2, false}));
  EXPECT_EQ(d->blocked, (ui::BoundedCount{0, false}));
}

TEST(UiStore, DoneCountsAreExactWhileTheTableHoldsFewerThanTheBound) {
  TestSchema schema;
  insert_rows(schema, "a", "done", 3);
  insert_rows(schema, "b", "done", 2);
  UiStoreOptions small = options(0ms);
  small.count_bound = 4;
  PgUiStore store(schema.config().database, small);
  ui::Overview overview = store.overview();
  EXPECT_EQ(find_queue(overview, "a")->done, (ui::BoundedCount{3, true}));  // 5 > 4: a window
  PgUiStore exact(schema.config().database, options(0ms));
  overview = exact.overview();
  EXPECT_EQ(find_queue(overview, "a")->done, (ui::BoundedCount{3, false}));
  EXPECT_EQ(find_queue(overview, "b")->done, (ui::BoundedCount{2, false}));
}

TEST(UiStore, OldestDueAgeIsThatOfTheQueuesOldestDueJob) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (type, run_at) VALUES ('work', now() - interval '90 s'), "
      "('work', now() + interval '1 h')");
  PgUiStore store(schema.config().database);
  const ui::Overview overview = store.overview();  // kept: q points into it
  const auto* q = find_queue(overview, "default");
  ASSERT_NE(q, nullptr);
  EXPECT_GE(q->oldest_due_age_seconds, 89);
  EXPECT_LT(q->oldest_due_age_seconds, 200);
}

TEST(UiStore, OverviewIsCachedForAllCallersUntilTheTtlOrAnAction) {
  TestSchema schema;
  insert_rows(schema, "default", "pending", 1);
  PgUiStore store(schema.config().database, options(1h));
  EXPECT_EQ(find_queue(store.overview(), "default")->pending.value, 1);
  insert_rows(schema, "default", "pending", 1);
  const auto sent = store.statements_sent();
  // From several threads, as the web server calls: all answered from the one cache.
  std::vector<std::thread> threads;
  std::atomic<int> stale{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      if (find_queue(store.overview(), "default")->pending.value == 1) ++stale;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(stale.load(), 4);
  EXPECT_EQ(store.statements_sent(), sent);
  // An action clears the cache: the page it returns to shows its effect.
  store.pause_queue("default", kAlice);
  const ui::Overview after = store.overview();
  EXPECT_EQ(find_queue(after, "default")->pending.value, 2);
  EXPECT_TRUE(find_queue(after, "default")->paused);

  PgUiStore uncached(schema.config().database, options(0ms));
  EXPECT_EQ(find_queue(uncached.overview(), "default")->pending.value, 2);
  insert_rows(schema, "default", "pending", 1);
  EXPECT_EQ(find_queue(uncached.overview(), "default")->pending.value, 3);
}

TEST(UiStore, LastHourHasSixtyMinutesOfDoneAndFailed) {
  TestSchema schema;
  insert_rows(schema, "default", "done", 7, "work", "5 min");
  insert_rows(schema, "default", "dead", 2, "work", "5 min");
  insert_rows(schema, "default", "done", 3, "work", "2 h");  // outside the hour
  PgUiStore store(schema.config().database, options(0ms));
  for (int round = 0; round < 2; ++round) {  // the second from the kept minutes
    const ui::Overview overview = store.overview();
    ASSERT_EQ(overview.last_hour.size(), 60u);
    std::int64_t done = 0;
    std::int64_t failed = 0;
    for (std::size_t i = 0; i < overview.last_hour.size(); ++i) {
      done += overview.last_hour[i].done;
      failed += overview.last_hour[i].failed;
      if (i > 0) {
        EXPECT_EQ(overview.last_hour[i].minute_epoch - overview.last_hour[i - 1].minute_epoch, 60);
      }
    }
    EXPECT_EQ(done, 7) << "round " << round;
    EXPECT_EQ(failed, 2) << "round " << round;
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    EXPECT_LE(std::abs(overview.last_hour.back().minute_epoch - now), 120);
  }
}

TEST(UiStore, DaemonsTableIsUpsertedShownExpiredAndRemoved) {
  TestSchema schema;
  PgJobStore jobs(schema.config().database, "test");
  DaemonReport report{"host-a:1:abcd", "host-a", 1, "1.2.3", 8, 0, 30s};
  jobs.report_daemon(report);
  report.busy = 3;
  jobs.report_daemon(report);  // an upsert: still one row, started_at kept
  jobs.report_daemon({"host-b:2:beef", "host-b", 2, "1.2.3", 4, 1, 30s});
  jobs.lead_and_rescue("host-b:2:beef", 30s, RetryConfig{}, 10);
  EXPECT_EQ(schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_daemons")), "2");

  PgUiStore store(schema.config().database, options(0ms));
  ui::Overview overview = store.overview();
  ASSERT_EQ(overview.daemons.size(), 2u);
  EXPECT_EQ(overview.daemons[0].id, "host-a:1:abcd");
  EXPECT_EQ(overview.daemons[0].busy, 3);
  EXPECT_EQ(overview.daemons[0].concurrency, 8);
  EXPECT_EQ(overview.daemons[0].version, "1.2.3");
  EXPECT_FALSE(overview.daemons[0].leader);
  EXPECT_TRUE(overview.daemons[1].leader);
  EXPECT_LT(overview.daemons[1].seen_seconds_ago, 60);

  // A daemon that stopped reporting: hidden once its ttl passed, deleted by the expiry.
  jobs.report_daemon({"host-c:3:dead", "host-c", 3, "1.2.3", 4, 0, 1ms});
  ASSERT_TRUE(testing::wait_until(
      [&] {
        return schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_daemons") +
                            " WHERE expires_at < now()") == "1";
      },
      10s));
  EXPECT_EQ(store.overview().daemons.size(), 2u);
  EXPECT_EQ(jobs.expire_daemons(), 1);
  EXPECT_EQ(schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_daemons")), "2");

  jobs.remove_daemon("host-a:1:abcd");
  overview = store.overview();
  ASSERT_EQ(overview.daemons.size(), 1u);
  EXPECT_EQ(overview.daemons[0].id, "host-b:2:beef");
}

std::vector<std::int64_t> page_ids(const ui::JobPage& page) {
  std::vector<std::int64_t> ids;
  for (const auto& job : page.jobs) ids.push_back(job.id);
  return ids;
}

TEST(UiStore, JobPagesAreKeysetPagesNewestFirst) {
  TestSchema schema;
  schema.insert_jobs("work", 120);
  PgUiStore store(schema.config().database);
  std::vector<std::int64_t> seen;
  ui::JobFilter filter;
  filter.limit = 50;
  std::vector<std::size_t> sizes;
  for (int pages = 0; pages < 10; ++pages) {
    const ui::JobPage page = store.jobs(filter);
    sizes.push_back(page.jobs.size());
    for (auto id : page_ids(page)) seen.push_back(id);
    if (!page.next_before) break;
    EXPECT_EQ(*page.next_before, page.jobs.back().id);
    filter.before_id = page.next_before;
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{50, 50, 20}));
  ASSERT_EQ(seen.size(), 120u);
  EXPECT_TRUE(std::is_sorted(seen.rbegin(), seen.rend()));
  EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), 120u);
  // Exactly a page's worth: no next page.
  filter = {};
  filter.limit = 120;
  EXPECT_FALSE(store.jobs(filter).next_before);
}

TEST(UiStore, JobFiltersByStatusQueueTypeAndId) {
  TestSchema schema;
  insert_rows(schema, "default", "pending", 5, "a");
  insert_rows(schema, "mail", "pending", 4, "b");
  insert_rows(schema, "mail", "done", 6, "a");
  insert_rows(schema, "default", "dead", 3, "b");
  insert_rows(schema, "mail", "running", 2, "a");
  insert_rows(schema, "mail", "blocked", 2, "b");
  PgUiStore store(schema.config().database);
  auto count = [&](ui::JobFilter filter) {
    filter.limit = 200;
    const ui::JobPage page = store.jobs(filter);
    for (const auto& job : page.jobs) {
      EXPECT_EQ(job.status, filter.status.value_or(job.status));
      EXPECT_EQ(job.queue, filter.queue.value_or(job.queue));
      EXPECT_EQ(job.type, filter.type.value_or(job.type));
    }
    EXPECT_TRUE(std::is_sorted(page.jobs.rbegin(), page.jobs.rend(),
                               [](const auto& a, const auto& b) { return a.id < b.id; }));
    return page.jobs.size();
  };
  EXPECT_EQ(count({}), 22u);
  EXPECT_EQ(count(where("pending")), 9u);
  EXPECT_EQ(count(where("dead")), 3u);
  EXPECT_EQ(count(where("running")), 2u);
  EXPECT_EQ(count(where("blocked")), 2u);
  EXPECT_EQ(count(where("blocked", "mail", "b")), 2u);
  EXPECT_EQ(count(where({}, "mail")), 14u);
  EXPECT_EQ(count(where({}, {}, "a")), 13u);
  EXPECT_EQ(count(where("done", "mail", "a")), 6u);
  EXPECT_EQ(count(where("done", "default")), 0u);
  EXPECT_EQ(count(where({}, "nosuch")), 0u);
  const std::int64_t dead_id =
      std::stoll(schema.query("SELECT min(id) FROM {jobs} WHERE status = 'dead'"));
  ui::JobFilter by_id;
  by_id.id = dead_id;
  const ui::JobPage one = store.jobs(by_id);
  ASSERT_EQ(one.jobs.size(), 1u);
  EXPECT_EQ(one.jobs[0].id, dead_id);
  EXPECT_EQ(one.jobs[0].last_error, "boom");
  ui::JobFilter pending_by_id = where("pending");
  pending_by_id.id = dead_id;
  EXPECT_EQ(count(pending_by_id), 0u);
  // Pages across (queue, status) branches: keyset still newest first without overlap.
  ui::JobFilter mail = where({}, "mail");
  mail.limit = 5;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    const ui::JobPage page = store.jobs(mail);
    for (auto id : page_ids(page)) ids.push_back(id);
    if (!page.next_before) break;
    mail.before_id = page.next_before;
  }
  EXPECT_EQ(ids.size(), 14u);
  EXPECT_TRUE(std::is_sorted(ids.rbegin(), ids.rend()));
}

// A queue or type filter that done jobs may match looks at page_scan jobs per page: a page
// of a rare queue may be short or empty, but following next_before finds every match once.
TEST(UiStore, ScanLimitedPagesStillFindEveryMatchInOrder) {
  TestSchema schema;
  schema.exec(
      "INSERT INTO {jobs} (queue, type, status, finished_at) SELECT CASE WHEN g % 30 = 0 "
      "THEN 'rare' ELSE 'default' END, 'work', 'done', now() FROM generate_series(1, 100) g");
  UiStoreOptions small = options(0ms);
  small.page_scan = 20;
  PgUiStore store(schema.config().database, small);
  ui::JobFilter filter = where({}, "rare");
  filter.limit = 2;
  std::vector<std::int64_t> ids;
  int pages = 0;
  int empty_pages = 0;
  for (; pages < 50; ++pages) {
    const ui::JobPage page = store.jobs(filter);
    if (page.jobs.empty()) ++empty_pages;
    for (auto id : page_ids(page)) ids.push_back(id);
    if (!page.next_before) break;
    ASSERT_TRUE(!filter.before_id || *page.next_before < *filter.before_id);
    filter.before_id = page.next_before;
  }
  EXPECT_EQ(ids, (std::vector<std::int64_t>{90, 60, 30}));
  EXPECT_GT(empty_pages, 0);
  EXPECT_LT(pages, 50);

  // Done rows made rare (retention, a backlog of newer pending jobs): the same.
  schema.exec("UPDATE {jobs} SET status = 'pending', finished_at = NULL WHERE id % 25 <> 0");
  filter = where("done");
  filter.limit = 2;
  ids.clear();
  for (pages = 0; pages < 50; ++pages) {
    const ui::JobPage page = store.jobs(filter);
    for (auto id : page_ids(page)) ids.push_back(id);
    if (!page.next_before) break;
    filter.before_id = page.next_before;
  }
  EXPECT_EQ(ids, (std::vector<std::int64_t>{100, 75, 50, 25}));
}

// The job page's result, parents (a deleted one too) and children: the first 50 by id, and
// how many there are.
TEST(UiStore, JobDetailHasItsResultParentsAndChildren) {
  TestSchema schema;
  const std::string parent = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, finished_at, result) "
      "VALUES ('make', 'done', 1, now(), '{\"n\": 1}') RETURNING id");
  const std::string child = schema.query(
      "INSERT INTO {jobs} (type, status, blocked_by, on_parent_failure) "
      "VALUES ('use', 'blocked', 1, 'cancel') RETURNING id");
  const std::string deps = schema.qualified("pgjobd_dependencies");
  schema.exec("INSERT INTO " + deps + " VALUES (" + child + ", " + parent + ", 'done'), (" + child +
              ", 999999999, NULL)");
  // 150 more children, gone since (retention): listed by id, without type or status.
  schema.exec("INSERT INTO " + deps + " SELECT 1000000000 + i, " + parent +
              ", NULL FROM generate_series(1, 150) i");
  PgUiStore store(schema.config().database);

  const auto made = store.job(std::stoll(parent), true);
  ASSERT_TRUE(made);
  ASSERT_TRUE(made->result_json);
  EXPECT_EQ(*made->result_json, "{\"n\": 1}") << "compact: the page indents it";
  EXPECT_FALSE(made->result_cut);
  EXPECT_TRUE(made->parents.empty());
  ASSERT_EQ(made->children.size(), 50u);
  EXPECT_EQ(made->children[0], (ui::JobLink{std::stoll(child), "use", "blocked", ""}));
  EXPECT_EQ(made->children[1], (ui::JobLink{1000000001, "", "", ""}));
  EXPECT_EQ(made->children_total, (ui::BoundedCount{151, false}));
  EXPECT_FALSE(store.job(std::stoll(parent), false)->result_json);  // ui.show_payloads: false

  const auto used = store.job(std::stoll(child), true);
  ASSERT_TRUE(used);
  EXPECT_FALSE(used->result_json);
  ASSERT_EQ(used->parents.size(), 2u);
  EXPECT_EQ(used->parents[0], (ui::JobLink{std::stoll(parent), "make", "done", "done"}));
  EXPECT_EQ(used->parents[1], (ui::JobLink{999999999, "", "", ""}));
  EXPECT_EQ(used->parents_total, (ui::BoundedCount{2, false}));
  EXPECT_TRUE(used->children.empty());
}

// A payload or result of megabytes arrives as its first kJsonTextSent characters and a
// flag: the rest never leaves the server.
TEST(UiStore, JobDetailSendsABoundedPrefixOfHugeJson) {
  TestSchema schema;
  const std::string id = schema.query(
      "INSERT INTO {jobs} (type, status, attempts, finished_at, payload, result) VALUES ('big', "
      "'done', 1, now(), jsonb_build_array(repeat('é', 3000000)), '[1]') RETURNING id");
  PgUiStore store(schema.config().database);
  const auto job = store.job(std::stoll(id), true);
  ASSERT_TRUE(job && job->payload_json && job->result_json);
  EXPECT_TRUE(job->payload_cut);
  EXPECT_EQ(job->payload_json->size(), 2 + (ui::kJsonTextSent - 2) * 2) << "characters, not bytes";
  EXPECT_FALSE(job->result_cut);
  EXPECT_EQ(*job->result_json, "[1]");
}

TEST(UiStore, JobDetailHasEveryAttemptAndTheRunningOneLast) {
  TestSchema schema;
  schema.exec("INSERT INTO {jobs} (type, payload, unique_key) VALUES ('work', '{\"a\": 1}', 'k')");
  PgJobStore jobs(schema.config().database, "test");
  ClaimRequest claim;
  claim.slots = {{"default", 1}};
  claim.types = {"work"};
  claim.limit = 1;
  claim.worker_id = "host-a:1:abcd";
  claim.lease = 30s;
  auto claimed = jobs.claim(claim);
  ASSERT_EQ(claimed.size(), 1u);
  const std::int64_t id = claimed[0].id;
  Completion failed;
  failed.job = {id, 1};
  failed.outcome = Outcome::kRetry;
  failed.error = "first try broke";
  ASSERT_EQ(jobs.complete({failed}, claim.worker_id, false).written, 1);
  claim.worker_id = "host-b:2:beef";
  ASSERT_EQ(jobs.claim(claim).size(), 1u);

  PgUiStore store(schema.config().database);
  const auto detail = store.job(id, true);
  ASSERT_TRUE(detail);
  EXPECT_EQ(detail->summary.status, "running");
  EXPECT_EQ(detail->summary.attempts, 2);
  ASSERT_TRUE(detail->payload_json);
  EXPECT_NE(detail->payload_json->find("\"a\": 1"), std::string::npos);
  EXPECT_EQ(detail->locked_by, "host-b:2:beef");
  EXPECT_EQ(detail->unique_key, "k");
  EXPECT_FALSE(detail->locked_until.empty());
  EXPECT_EQ(detail->summary.created_at.size(), 20u);  // 2026-01-02T03:04:05Z
  EXPECT_EQ(detail->summary.created_at.back(), 'Z');
  ASSERT_EQ(detail->attempts.size(), 2u);
  EXPECT_EQ(detail->attempts[0].attempt, 1);
  EXPECT_EQ(detail->attempts[0].worker, "host-a:1:abcd");
  EXPECT_EQ(detail->attempts[0].outcome, "failed");
  EXPECT_EQ(detail->attempts[0].error, "first try broke");
  EXPECT_FALSE(detail->attempts[0].finished_at.empty());
  EXPECT_EQ(detail->attempts[1].attempt, 2);
  EXPECT_EQ(detail->attempts[1].worker, "host-b:2:beef");
  EXPECT_EQ(detail->attempts[1].outcome, "running");
  EXPECT_TRUE(detail->attempts[1].finished_at.empty());

  EXPECT_FALSE(store.job(id, false)->payload_json);  // ui.show_payloads: false
  EXPECT_FALSE(store.job(id + 1000, true));
}

TEST(UiStore, RetryAndCancelGoThroughTheSqlFunctionsAndAreAudited) {
  TestSchema schema;
  insert_rows(schema, "default", "dead", 2);
  insert_rows(schema, "default", "pending", 2);
  insert_rows(schema, "default", "done", 1);
  auto ids_where = [&](const std::string& where) {
    std::vector<std::int64_t> ids;
    const std::string list =
        schema.query("SELECT string_agg(id::text, ',' ORDER BY id) FROM {jobs} WHERE " + where);
    for (std::size_t pos = 0; pos < list.size();) {
      const auto end = std::min(list.find(',', pos), list.size());
      ids.push_back(std::stoll(list.substr(pos, end - pos)));
      pos = end + 1;
    }
    return ids;
  };
  const auto dead = ids_where("status = 'dead'");
  const auto pending = ids_where("status = 'pending'");
  const auto done = ids_where("status = 'done'");
  PgUiStore store(schema.config().database);

  const ui::ActionResult retried = store.retry({dead[0], dead[1], pending[0]}, kAlice);
  EXPECT_EQ(retried.changed, 2);
  EXPECT_EQ(retried.unchanged, 1);
  EXPECT_FALSE(retried.message.empty());
  EXPECT_EQ(schema.count("status = 'pending'"), 4);

  const ui::ActionResult cancelled =
      store.cancel({pending[1], done[0], 999999}, "bad batch", {"bob", "198.51.100.1"});
  EXPECT_EQ(cancelled.changed, 1);
  EXPECT_EQ(cancelled.unchanged, 2);
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + std::to_string(pending[1])),
            "cancelled");
  EXPECT_EQ(schema.query("SELECT status FROM {jobs} WHERE id = " + std::to_string(done[0])),
            "done");

  const auto entries = store.audit(100);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].action, "cancel");  // latest first
  EXPECT_EQ(entries[0].user, "bob");
  EXPECT_EQ(entries[0].remote_address, "198.51.100.1");
  EXPECT_EQ(entries[0].job_ids, (std::vector<std::int64_t>{pending[1], done[0], 999999}));
  EXPECT_NE(entries[0].detail.find("bad batch"), std::string::npos);
  EXPECT_EQ(entries[1].action, "retry");
  EXPECT_EQ(entries[1].user, "alice");
  EXPECT_EQ(entries[1].job_ids, (std::vector<std::int64_t>{dead[0], dead[1], pending[0]}));
  EXPECT_FALSE(entries[1].at.empty());
  EXPECT_EQ(store.audit(1).size(), 1u);

  // One job: its id is the target.
  store.retry({pending[1]}, kAlice);
  EXPECT_EQ(store.audit(1)[0].target, std::to_string(pending[1]));
}

TEST(UiStore, QueueAndScheduleActionsAreAuditedAndSayWhenNothingChanged) {
  TestSchema schema;
  schema.exec("SELECT " + schema.qualified("pgjobd_schedule_upsert") +
              "(name => 'nightly', type => 'report', cron => '0 3 * * *')");
  PgUiStore store(schema.config().database);
  EXPECT_EQ(store.pause_queue("mail", kAlice).changed, 1);
  EXPECT_EQ(store.pause_queue("mail", kAlice).unchanged, 1);
  ASSERT_EQ(store.queues().size(), 1u);
  EXPECT_TRUE(store.queues()[0].paused);
  EXPECT_FALSE(store.queues()[0].updated_at.empty());
  EXPECT_EQ(store.resume_queue("mail", kAlice).changed, 1);
  EXPECT_FALSE(store.queues()[0].paused);

  EXPECT_EQ(store.pause_schedule("nightly", kAlice).changed, 1);
  auto schedules = store.schedules();
  ASSERT_EQ(schedules.size(), 1u);
  EXPECT_TRUE(schedules[0].paused);
  EXPECT_EQ(schedules[0].timing, "0 3 * * * (UTC)");
  EXPECT_EQ(schedules[0].type, "report");
  EXPECT_EQ(store.resume_schedule("nightly", kAlice).changed, 1);
  EXPECT_FALSE(store.schedules()[0].paused);
  const ui::ActionResult missing = store.pause_schedule("nosuch", kAlice);
  EXPECT_EQ(missing.changed, 0);
  EXPECT_EQ(missing.unchanged, 1);

  std::vector<std::string> actions;
  for (const auto& entry : store.audit(100)) actions.push_back(entry.action + " " + entry.target);
  EXPECT_EQ(actions, (std::vector<std::string>{"resume_schedule nightly", "pause_schedule nightly",
                                               "resume_queue mail", "pause_queue mail",
                                               "pause_queue mail"}));
  // A name the SQL interface refuses: DbError, and no audit row.
  EXPECT_THROW(store.pause_queue("", kAlice), DbError);
  EXPECT_EQ(store.audit(100).size(), 5u);
  EXPECT_TRUE(store.limits().empty());
}

TEST(UiStore, LimitsShowTheirDefinitionAndUse) {
  TestSchema schema;
  PgJobStore jobs(schema.config().database, "test");
  LimitConfig partner;
  partner.types = {"call_partner"};
  partner.concurrency = 3;
  LimitConfig mail;
  mail.queues = {"mail"};
  mail.key = "user";
  mail.rate_per_second = 10;
  mail.rate = "600/m";
  mail.burst = 20;
  jobs.sync_limits({{"partner", partner}, {"mail", mail}}, "test");
  schema.insert_jobs("call_partner", 5);
  ASSERT_EQ(
      jobs.claim_limited({{{"default", 10}}, {"call_partner"}, 10, "w", Millis(30000)}).jobs.size(),
      3u);
  PgUiStore store(schema.config().database);
  const auto limits = store.limits();
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].name, "mail");
  EXPECT_EQ(limits[0].definition, "queues [mail], key user, rate 600/m, burst 20");
  EXPECT_EQ(limits[0].running, 0);
  EXPECT_EQ(limits[0].partitions, 0) << "no job of it runs";
  EXPECT_EQ(limits[1].name, "partner");
  EXPECT_EQ(limits[1].definition, "types [call_partner], concurrency 3");
  EXPECT_EQ(limits[1].running, 3);
  EXPECT_EQ(limits[1].partitions, 1);
}

TEST(UiStore, ReadsChangeNothing) {
  TestSchema schema;
  insert_rows(schema, "default", "dead", 2);
  const std::string before =
      schema.query("SELECT md5(string_agg(j::text, ',' ORDER BY id)) FROM {jobs} j");
  PgUiStore store(schema.config().database);
  store.overview();
  store.jobs({});
  store.job(1, true);
  store.queues();
  store.schedules();
  store.audit(10);
  EXPECT_EQ(schema.query("SELECT md5(string_agg(j::text, ',' ORDER BY id)) FROM {jobs} j"), before);
  EXPECT_EQ(schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_audit")), "0");
  EXPECT_EQ(schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_queues")), "0");
}

TEST(UiStore, EveryReadIsBoundedByTheStatementTimeout) {
  TestSchema schema;
  schema.insert_jobs("work", 3);
  PgUiStore store(schema.config().database, options(0ms, 300ms));
  ASSERT_EQ(store.jobs({}).jobs.size(), 3u);
  // Another session holds a lock every read waits for: only the timeout ends the wait.
  auto locker = open_connection(schema.config().database, "test-locker");
  pqxx::work lock(*locker);
  lock.exec("LOCK TABLE " + schema.qualified("jobs") + " IN ACCESS EXCLUSIVE MODE");
  const auto started = std::chrono::steady_clock::now();
  try {
    store.jobs({});
    ADD_FAILURE() << "the read waited for the lock without a timeout";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("statement timeout"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store.overview(), DbError);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  lock.abort();
  EXPECT_EQ(store.jobs({}).jobs.size(), 3u);  // reconnected
}

// The store prepares nothing (ui_statements.hpp): behind a transaction pooler it works as
// it does directly.
TEST(UiStore, WorksWithTheTransactionPoolerSetting) {
  TestSchema schema;
  schema.insert_jobs("work", 2);
  DatabaseConfig db = schema.config().database;
  db.pooler = "transaction";
  PgUiStore store(db);
  EXPECT_EQ(store.jobs({}).jobs.size(), 2u);
  EXPECT_EQ(store.pause_queue("default", kAlice).changed, 1);
  EXPECT_EQ(store.overview().queues.size(), 1u);
}

// `n` done rows 100 ms apart, the newest now (an hour holds 36,000 of them), one in ten in
// queue "mail", one in three of type "resize"; a few hundred failed, dead, pending and
// running ones; then VACUUM ANALYZE, as autovacuum would have left the table.
void fill_finished_table(TestSchema& schema, std::int64_t n) {
  schema.exec(
      "INSERT INTO {jobs} (queue, type, payload, status, attempts, created_at, updated_at, "
      "started_at, finished_at, run_at, locked_by) "
      "SELECT CASE WHEN g % 10 = 0 THEN 'mail' ELSE 'default' END, "
      "CASE WHEN g % 3 = 0 THEN 'resize' ELSE 'email' END, '{\"n\": 1}', 'done', 1, t, t, t, t, "
      "t, 'bench:1:0000' FROM generate_series(1, " +
      std::to_string(n) + ") g, LATERAL (SELECT now() - (" + std::to_string(n) +
      " - g) * interval '100 ms' AS t) x");
  insert_rows(schema, "default", "dead", 200, "email", "10 min");
  insert_rows(schema, "default", "failed", 100);
  insert_rows(schema, "default", "pending", 1000);
  insert_rows(schema, "rare", "pending", 10);
  insert_rows(schema, "default", "running", 50);
  schema.exec("VACUUM ANALYZE {jobs}");
}

// Each statement as the store sends it (unnamed: a custom plan), with the values of the
// pages the benchmark times: none reads the whole table.
void expect_no_table_scan(TestSchema& schema) {
  const stmt::UiStatements sql = stmt::ui_statements(quote_identifier(schema.name()));
  auto conn = open_connection(schema.config().database, "test-plans");
  const std::vector<std::pair<std::string, std::string>> explained = {
      {sql.overview_counts, "10001"},
      {sql.throughput, "0"},
      {sql.jobs, "NULL, NULL, NULL, 9223372036854775807, 51, 51"},
      {sql.jobs, "'dead', NULL, NULL, 9223372036854775807, 51, 51"},
      {sql.jobs, "'pending', NULL, NULL, 9223372036854775807, 51, 51"},
      {sql.jobs, "'failed', NULL, NULL, 9223372036854775807, 51, 51"},
      {sql.jobs, "'blocked', NULL, NULL, 9223372036854775807, 51, 51"},
      {sql.jobs, "'dead', 'default', NULL, 9223372036854775807, 51, 51"},
      {sql.jobs, "NULL, NULL, 'resize', 9223372036854775807, 51, 10000"},
      {sql.jobs, "NULL, 'mail', NULL, 9223372036854775807, 51, 10000"},
      {sql.jobs, "NULL, 'rare', NULL, 9223372036854775807, 51, 10000"},
      {sql.jobs, "'done', 'mail', 'resize', 4000000, 51, 10000"},
      {sql.job, "4000000, true, 65536"},
      {sql.job_attempts, "4000000"},
      {sql.job_parents, "4000000, 100, 10001"},
      {sql.job_children, "4000000, 100, 10001"},
      {sql.queues, "10001"},
  };
  pqxx::nontransaction plans(*conn);
  plans.exec("SET plan_cache_mode = force_custom_plan");
  plans.exec("SET jit = off");
  for (const auto& [text, args] : explained) {
    plans.exec("PREPARE ui_plan AS " + text);
    std::string plan;
    for (const auto& row :
         plans.exec("EXPLAIN EXECUTE ui_plan" + (args.empty() ? "" : "(" + args + ")"))) {
      plan += row[0].as<std::string>() + "\n";
    }
    plans.exec("DEALLOCATE ui_plan");
    // Bitmap scans are allowed: the planner uses them on the small partial indexes (the
    // running rows of jobs_lease_idx).
    EXPECT_NE(plan.find(" on jobs"), std::string::npos) << plan;  // the table is read
    EXPECT_EQ(plan.find("Seq Scan on jobs"), std::string::npos) << args << "\n" << plan;
  }
}

// The plans next to 200,000 done rows, small enough for every test run (the benchmark
// checks them next to millions).
TEST(UiStore, NoStatementReadsTheWholeTable) {
  TestSchema schema;
  fill_finished_table(schema, 200000);
  expect_no_table_scan(schema);
}

// The dashboard next to millions of done rows (bench/README.md "Dashboard"): fills the
// table with PGJOBD_UI_BENCH_ROWS done rows (5000000 for the README's numbers) in one
// INSERT ... SELECT, then times each page and checks that no plan reads the whole table.
// Skipped unless the variable is set: filling 5M rows takes about a minute.
class UiStoreBench : public ::testing::Test {
 protected:
  static std::int64_t rows() {
    const char* value = std::getenv("PGJOBD_UI_BENCH_ROWS");
    return value ? std::atoll(value) : 0;
  }
};

double p95_ms(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[static_cast<std::size_t>(static_cast<double>(samples.size() - 1) * 0.95)];
}

TEST_F(UiStoreBench, PagesNextToMillionsOfDoneRows) {
  const std::int64_t n = rows();
  if (n <= 0) GTEST_SKIP() << "set PGJOBD_UI_BENCH_ROWS=5000000 to run";
  TestSchema schema;
  const auto fill_started = std::chrono::steady_clock::now();
  fill_finished_table(schema, n);
  std::cout
      << "filled " << n << " done rows in "
      << std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_started).count()
      << " s\n";
  expect_no_table_scan(schema);

  PgUiStore store(schema.config().database, options(0ms));
  constexpr int kRounds = 100;
  auto time = [&](const char* name, const std::function<void(int)>& page) {
    std::vector<double> samples;
    for (int i = 0; i < kRounds; ++i) {
      const auto started = std::chrono::steady_clock::now();
      page(i);
      samples.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count());
    }
    const double p95 = p95_ms(samples);
    std::sort(samples.begin(), samples.end());
    std::cout << name << ": p50 " << samples[samples.size() / 2] << " ms, p95 " << p95 << " ms\n";
    return p95;
  };
  const std::int64_t newest = std::stoll(schema.query("SELECT max(id) FROM {jobs}"));
  EXPECT_LT(time("overview (no cache)", [&](int) { store.overview(); }), 100);
  EXPECT_LT(time("jobs, no filter", [&](int) { store.jobs({}); }), 100);
  EXPECT_LT(
      time("jobs, deeper pages",
           [&](int i) { store.jobs(before({}, newest - static_cast<std::int64_t>(i) * 40000)); }),
      100);
  EXPECT_LT(time("jobs, status=dead", [&](int) { store.jobs(where("dead")); }), 100);
  EXPECT_LT(time("jobs, status=pending", [&](int) { store.jobs(where("pending")); }), 100);
  EXPECT_LT(time("jobs, status=done", [&](int) { store.jobs(where("done")); }), 100);
  EXPECT_LT(time("jobs, queue=mail", [&](int) { store.jobs(where({}, "mail")); }), 100);
  // A type no job has: every page is empty, each looks at 10,000 jobs.
  EXPECT_LT(time("jobs, type=nosuch (empty pages)",
                 [&](int i) {
                   store.jobs(before(where({}, {}, "nosuch"),
                                     newest - static_cast<std::int64_t>(i) * 40000));
                 }),
            100);
  EXPECT_LT(time("jobs, queue=rare", [&](int) { store.jobs(where({}, "rare")); }), 100);
  EXPECT_LT(time("jobs, status=done queue=mail type=resize",
                 [&](int i) {
                   store.jobs(before(where("done", "mail", "resize"),
                                     newest - static_cast<std::int64_t>(i) * 40000));
                 }),
            100);
  EXPECT_LT(time("job page",
                 [&](int i) { store.job(1 + (static_cast<std::int64_t>(i) * 48611) % n, true); }),
            100);
}

}  // namespace
}  // namespace pgjobd
