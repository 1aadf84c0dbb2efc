// Limits against PostgreSQL (sql/007_limits.up.sql, sql/009_limit_counts.up.sql,
// sql/functions/pgjobd_claim_limited.sql, README "Limits"): the definitions a daemon writes, the
// limited claim's counts and tokens under many concurrent claimers, a partition another
// claimer is claiming in, what frees a place (completion, rescue, a deleted row) and what
// does not (a stale owner), no head-of-line blocking, turns between partitions, hostile
// payloads, the cleanup of idle buckets, and the claim's reads next to a million finished
// rows.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "db/admin/admin_session.hpp"
#include "db/pg_job_store.hpp"
#include "db/sql_text.hpp"
#include "store/completion_store.hpp"
#include "support/claims.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using Clock = std::chrono::steady_clock;
using testing::TestSchema;

using testing::claim_of;
using testing::kLease;

// PostgreSQL's own count of this transaction's reads of jobs: sequential scans, and rows
// fetched through indexes.
std::pair<std::int64_t, std::int64_t> reads_of_jobs(pqxx::transaction_base& txn,
                                                    const std::string& schema) {
  const auto row = txn.exec_params1(
      "SELECT seq_scan, coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
      "WHERE schemaname = $1 AND relname = 'jobs'",
      schema);
  return {row[0].as<std::int64_t>(), row[1].as<std::int64_t>()};
}

// The limited claim of up to n jobs of `types` (as an array literal: "{a,b}") from the
// default queue, counting the jobs it claimed.
std::string limited_claim(TestSchema& schema, const std::string& types, int n) {
  const std::string count = std::to_string(n);
  return "SELECT count(job_id) FROM " + quote_identifier(schema.name()) +
         ".pgjobd_claim_limited('{default}', '{" + count + "}', '" + types + "', " + count +
         ", 'w', 30000, '', 1000000)";
}

// Runs `claim` (limited_claim) in a transaction of its own, committed: the jobs it claimed.
int claim_committed(pqxx::connection_base& conn, const std::string& claim) {
  pqxx::work txn(conn);
  const int claimed = txn.exec(claim)[0][0].as<int>();
  txn.commit();
  return claimed;
}

LimitConfig concurrency_limit(std::vector<std::string> types, int concurrency,
                              std::string key = "") {
  LimitConfig limit;
  limit.types = std::move(types);
  limit.concurrency = concurrency;
  limit.key = std::move(key);
  return limit;
}

LimitConfig rate_limit(std::vector<std::string> types, double per_second, int burst) {
  LimitConfig limit;
  limit.types = std::move(types);
  limit.rate_per_second = per_second;
  limit.burst = burst;
  return limit;
}

void insert_keyed(TestSchema& schema, const std::string& type, const std::string& user, int n) {
  schema.exec("INSERT INTO {jobs} (type, payload) SELECT '" + type +
              "', jsonb_build_object('user', '" + user + "') FROM generate_series(1, " +
              std::to_string(n) + ")");
}

// n jobs of type 'a' whose user is g % keys (g counting from 0): in claim order, each key's
// job in turn.
void insert_spread(TestSchema& schema, int keys, int n) {
  schema.exec("INSERT INTO {jobs} (type, payload) SELECT 'a', jsonb_build_object('user', g % " +
              std::to_string(keys) + ") FROM generate_series(0, " + std::to_string(n - 1) +
              ") AS g");
}

// This transaction's scans of pgjobd_limits: 2 per claim of the one limit's short path, 6
// through the general path.
std::int64_t scans_of_limits(pqxx::transaction_base& txn, const std::string& schema) {
  return txn
      .exec_params1(
          "SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables "
          "WHERE schemaname = $1 AND relname = 'pgjobd_limits'",
          schema)[0]
      .as<std::int64_t>();
}

std::vector<Completion> done_all(const std::vector<Job>& jobs) {
  std::vector<Completion> batch;
  for (const Job& job : jobs)
    batch.push_back({{job.id, job.attempt}, Outcome::kDone, "", Millis(0)});
  return batch;
}

// Completes the jobs as the daemon's completer does: a completion whose row another
// session holds is sent again until written (a claim that read the row pending keeps a
// lock on its running version until it commits: over 50 ms on a loaded machine, with
// many claimers). Returns how many were fenced off as stale.
int complete_all(PgJobStore& store, const std::vector<Job>& jobs, const std::string& worker) {
  std::vector<Completion> batch = done_all(jobs);
  int stale = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!batch.empty()) {
    const CompletionReport report = store.complete(batch, worker, false);
    stale += report.stale;
    std::vector<Completion> held;
    for (const JobAttempt& job : report.held) {
      held.push_back({job, Outcome::kDone, "", Millis(0)});
    }
    batch = std::move(held);
    if (batch.empty() || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the completer's retry, shorter
  }
  EXPECT_TRUE(batch.empty()) << batch.size() << " completions held for 30 s";
  return stale;
}

TEST(Limits, SyncReportsWhatChangedAndWhoWroteItBefore) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  std::map<std::string, LimitConfig> limits = {{"a", concurrency_limit({"x"}, 3)},
                                               {"b", rate_limit({"y"}, 10, 20)}};
  auto changes = store.sync_limits(limits, "daemon-1").changes;
  ASSERT_EQ(changes.size(), 2U);
  EXPECT_EQ(changes[0].change, "added");
  EXPECT_TRUE(store.sync_limits(limits, "daemon-2").changes.empty())
      << "an unchanged write changes nothing";

  limits["a"].concurrency = 5;
  limits.erase("b");
  changes = store.sync_limits(limits, "daemon-2").changes;
  ASSERT_EQ(changes.size(), 2U);
  std::map<std::string, std::pair<std::string, std::string>> by_name;
  for (const auto& c : changes) by_name[c.name] = {c.change, c.previous_writer};
  EXPECT_EQ(by_name["a"], std::make_pair(std::string("changed"), std::string("daemon-1")));
  EXPECT_EQ(by_name["b"], std::make_pair(std::string("removed"), std::string("daemon-1")));

  const auto loaded = store.load_limits();
  ASSERT_EQ(loaded.size(), 1U);
  EXPECT_EQ(loaded[0].name, "a");
  EXPECT_EQ(loaded[0].limit.types, std::vector<std::string>{"x"});
  EXPECT_EQ(loaded[0].limit.concurrency, 5);
  EXPECT_EQ(loaded[0].written_by, "daemon-2");
}

// `pgjobd stats` (and the dashboard's queues page, which reads the same) shows a rate as
// the writer's YAML has it: the sync keeps the text beside the starts per second, and the
// same number written otherwise is a change. A row written without the text (by a daemon
// older than schema v15) reads from the starts per second.
TEST(Limits, StatsShowARateAsTheYamlWroteIt) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  AdminSession admin(schema.config().database, "test");
  const auto shown = [&] { return admin.limit_stats().at(0).definition; };
  LimitConfig limit = rate_limit({"x"}, 2, 1);
  limit.rate = "120/m";
  ASSERT_EQ(store.sync_limits({{"a", limit}}, "d1").changes.size(), 1U);
  EXPECT_EQ(shown(), "types [x], rate 120/m");

  limit.rate = "2/s";
  const auto changes = store.sync_limits({{"a", limit}}, "d2").changes;
  ASSERT_EQ(changes.size(), 1U) << "the same rate written otherwise is a change";
  EXPECT_EQ(changes[0].change, "changed");
  EXPECT_EQ(shown(), "types [x], rate 2/s");

  limit.rate = "120/m";
  ASSERT_EQ(store.sync_limits({{"a", limit}}, "d1").changes.size(), 1U);
  ASSERT_EQ(schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_limits_sync") +
                         "('{\"a\": {\"types\": [\"x\"], \"rate_per_second\": 2, "
                         "\"burst\": 1}}', 'older')"),
            "1")
      << "an older daemon's write, without the text, is a change";
  EXPECT_EQ(shown(), "types [x], rate 2/s");
}

// Another session holding the sync's advisory lock (any role can take it), or a row of
// pgjobd_limits, in an open transaction: the sync gives up after its lock_timeout (200 ms),
// writes nothing and says what holds it; once the holder commits it writes. Each holder's
// session is ended by the server after 8 s idle in its transaction, so a sync that waits
// for it returns then (and fails the time bound) rather than hanging the test.
TEST(Limits, SyncNeverWaitsLongForALockAnotherSessionHolds) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  const std::map<std::string, LimitConfig> before = {{"a", concurrency_limit({"x"}, 3)}};
  std::map<std::string, LimitConfig> after = {{"a", concurrency_limit({"x"}, 5)},
                                              {"b", rate_limit({"y"}, 10, 20)}};
  ASSERT_EQ(store.sync_limits(before, "d1").changes.size(), 1U);
  const auto concurrency_of_a = [&] {
    return schema.query("SELECT concurrency FROM " + schema.qualified("pgjobd_limits") +
                        " WHERE name = 'a'");
  };
  for (const bool advisory : {true, false}) {
    SCOPED_TRACE(advisory ? "the advisory lock" : "a row of pgjobd_limits");
    auto holder = open_connection(schema.config().database, "test");
    pqxx::work held(*holder);
    held.exec("SET LOCAL idle_in_transaction_session_timeout = '8s'");
    const int holder_pid = held.exec("SELECT pg_backend_pid()")[0][0].as<int>();
    if (advisory) {
      held.exec_params("SELECT pg_advisory_xact_lock(hashtext('pgjobd_limits_sync'), hashtext($1))",
                       schema.name());
    } else {
      held.exec("SELECT 1 FROM " + schema.qualified("pgjobd_limits") +
                " WHERE name = 'a' FOR UPDATE");
    }
    const auto started = Clock::now();
    const LimitSync busy = store.sync_limits(after, "d2");
    const double waited = std::chrono::duration<double>(Clock::now() - started).count();
    EXPECT_LT(waited, 2.0) << "the sync waited for the other session's lock";
    EXPECT_TRUE(busy.changes.empty());
    EXPECT_EQ(concurrency_of_a(), "3") << "nothing is written while the lock is held";
    if (advisory) {
      EXPECT_EQ(busy.busy,
                "the advisory lock pgjobd_limits_sync, held by pid " + std::to_string(holder_pid));
    } else {
      EXPECT_EQ(busy.busy, "a row of pgjobd_limits or its buckets, locked by another session");
    }
    held.commit();
  }
  const LimitSync written = store.sync_limits(after, "d2");
  EXPECT_TRUE(written.busy.empty()) << written.busy;
  EXPECT_EQ(written.changes.size(), 2U);
  EXPECT_EQ(concurrency_of_a(), "5");
}

TEST(Limits, SyncRefusesADefinitionTheTableCannotHold) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  LimitConfig nothing;
  nothing.types = {"x"};  // neither concurrency nor rate
  try {
    store.sync_limits({{"a", nothing}}, "d");
    FAIL() << "a limit that limits nothing was written";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("pgjobd_limits_limits"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store.load_limits().empty()) << "a failed write leaves the old definitions";
}

// Under one limit a claimer counts its own jobs by what it says it holds (own_running:
// its handlers not returned), and every other claimer's by their rows: its jobs whose
// handlers returned, their completions not yet written, no longer hold its claims back,
// while another claimer still counts them. Beside a second limit (the general path) every
// claimer counts rows. The same through the plain claim under one limit
// (ClaimRequest::one_concurrency_limit), which beside a second limit is the limited claim.
TEST(Limits, UnderOneLimitAClaimerCountsItsOwnJobsByWhatItHolds) {
  for (const bool plain : {false, true}) {
    for (const bool alone : {true, false}) {
      SCOPED_TRACE(std::string(alone ? "one limit" : "two limits") +
                   (plain ? ", the plain claim's path asked for" : ""));
      TestSchema schema;
      PgJobStore store(schema.config().database, "test");
      std::map<std::string, LimitConfig> limits{{"c", concurrency_limit({"a"}, 5)}};
      if (!alone) limits.emplace("k", concurrency_limit({"a"}, 100, "user"));
      store.sync_limits(limits, "test");
      schema.insert_jobs("a", 40);
      std::vector<LimitHold> held;
      const auto claim = [&](const std::string& owner, int own_running) {
        ClaimRequest request = claim_of(10, {"a"}, owner);
        request.own_running = own_running;
        request.one_concurrency_limit = plain;
        LimitedClaim claimed = store.claim_limited(request);
        held = claimed.held;
        return claimed.jobs.size();
      };
      const auto held_by_c = [&] {
        return held.size() == 1 && held[0].limit == "c" && held[0].reason == "concurrency" &&
               !held[0].retry_in;
      };
      ASSERT_EQ(claim("one", 0), 5u) << "the limit";
      EXPECT_TRUE(held_by_c()) << "due jobs were left";
      EXPECT_EQ(claim("one", 5), 0u) << "its 5 jobs still run";
      EXPECT_TRUE(held_by_c());
      EXPECT_EQ(claim("one", -1), 0u) << "not told: its 5 running rows count";
      // 3 of its handlers returned: their rows still run, their completions not written.
      EXPECT_EQ(claim("one", 2), alone ? 3u : 0u);
      EXPECT_EQ(schema.count("status = 'running'"), alone ? 8 : 5);
      EXPECT_EQ(claim("two", 0), 0u) << "another claimer counts every row of the first";
      EXPECT_EQ(claim("one", 5), 0u);
      // Room for more than are due: nothing is held back.
      schema.exec("UPDATE {jobs} SET status = 'done' WHERE status = 'running'");
      schema.exec(
          "DELETE FROM {jobs} WHERE id NOT IN (SELECT id FROM {jobs} WHERE status = "
          "'pending' ORDER BY id LIMIT 2)");
      EXPECT_EQ(claim("one", 0), 2u);
      EXPECT_TRUE(held.empty()) << "held back with no due job left";
    }
  }
}

// The plain claim under one limit is its own path: with the limited claim's function gone,
// a claim with room still claims (and one the limit holds back, which the function
// reports, fails).
TEST(Limits, UnderOneLimitTheClaimWithRoomIsThePlainClaim) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"c", concurrency_limit({"a"}, 5)}}, "test");
  schema.insert_jobs("a", 40);
  ClaimRequest request = claim_of(10, {"a"}, "one");
  request.own_running = 0;
  request.one_concurrency_limit = true;
  schema.exec("DROP FUNCTION " + schema.qualified("pgjobd_claim_limited") +
              "(text[], int[], text[], int, text, bigint, "
              "text, bigint, int, int)");
  const LimitedClaim claimed = store.claim_limited(request);
  EXPECT_EQ(claimed.jobs.size(), 5u);
  ASSERT_EQ(claimed.held.size(), 1u);
  EXPECT_EQ(claimed.held[0].limit, "c");
  request.own_running = 5;
  EXPECT_THROW(store.claim_limited(request), DbError) << "held back: the function's answer";
  EXPECT_EQ(schema.count("status = 'running'"), 5);
}

// A daemon claims plainly while the limits it read say there are none. One added since is
// found by the plain claims themselves, in their own snapshot: they take nothing (the
// fetcher then reads the limits and claims limited). Any limit, even on other types: the
// daemon's registry decides which claim fits once it has read them. Pinned plans and
// plans made at each execution alike.
TEST(Limits, ThePlainClaimsTakeNothingOnceALimitExists) {
  for (const StoreUse use : {StoreUse::kHotPath, StoreUse::kOccasional}) {
    TestSchema schema;
    PgJobStore store(schema.config().database, "test", use);
    schema.insert_jobs("a", 6);
    const ClaimRequest request = claim_of(2, {"a"}, "w");
    ASSERT_EQ(store.claim(request).size(), 2u) << "no limit yet";
    ASSERT_EQ(store.claim_with_due(request, {"default"}).jobs.size(), 2u);
    PgJobStore other(schema.config().database, "other");
    other.sync_limits({{"c", concurrency_limit({"b"}, 5)}}, "other");
    const std::int64_t next = std::stoll(schema.query(
        "SELECT min(id) FROM " + schema.qualified("jobs") + " WHERE status = 'pending'"));
    EXPECT_THROW(store.claim(request), LimitsExist);
    EXPECT_THROW(store.claim_with_due(request, {"default"}), LimitsExist);
    EXPECT_THROW(store.claim_with_due(request, {}), LimitsExist);
    EXPECT_THROW(store.claim_ids(request, {next}), LimitsExist);
    EXPECT_EQ(schema.count("status = 'running'"), 4);
    EXPECT_EQ(store.claim_limited(request).jobs.size(), 2u) << "the limited claim takes them";
  }
}

// Eight claimers at once over one limit of 3, each claiming `request(t)` (claimer t)
// until `jobs` are done. Each counts a job from the claim's return until just before it
// sends the completion: all that time the job is running in the database, so the count can
// only be too low, never too high. Above the limit means the database ran more than it.
struct ClaimersRun {
  int most = 0;   // limited jobs in hand at once, at most
  int done = 0;   // jobs claimed and completed
  int stale = 0;  // completions fenced off: a job claimed twice
};
ClaimersRun run_claimers(TestSchema& schema, int jobs,
                         const std::function<ClaimRequest(int t)>& request) {
  std::atomic<int> in_hand{0};
  std::atomic<int> most{0};
  std::atomic<int> done{0};
  std::atomic<int> stale{0};
  std::vector<std::thread> claimers;
  for (int t = 0; t < 8; ++t) {
    claimers.emplace_back([&, t] {
      PgJobStore store(schema.config().database, "claimer");
      const auto deadline = Clock::now() + std::chrono::seconds(60);
      while (done.load() < jobs && Clock::now() < deadline) {
        const ClaimRequest asked = request(t);
        const LimitedClaim claim = store.claim_limited(asked);
        int limited = 0;
        for (const Job& job : claim.jobs) limited += job.type == "a" ? 1 : 0;
        const int now = in_hand.fetch_add(limited) + limited;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(claim.jobs.empty() ? 1 : 3));
        in_hand.fetch_sub(limited);
        stale += complete_all(store, claim.jobs, asked.worker_id);
        done.fetch_add(static_cast<int>(claim.jobs.size()));
      }
    });
  }
  for (auto& thread : claimers) thread.join();
  return {most.load(), done.load(), stale.load()};
}

// Every job ran once, and the limit was used in full, never more.
void expect_exact(const ClaimersRun& run, TestSchema& schema, int jobs, int limit) {
  EXPECT_EQ(run.stale, 0) << "a job claimed twice: its first completion was fenced off";
  EXPECT_EQ(run.done, jobs) << testing::table_summary(schema);
  EXPECT_LE(run.most, limit);
  EXPECT_EQ(run.most, limit) << "the limit was never used in full";
  EXPECT_EQ(schema.count("status = 'done'"), jobs);
}

TEST(Limits, ConcurrencyHoldsExactlyUnderManyConcurrentClaimers) {
  TestSchema schema;
  PgJobStore admin(schema.config().database, "test");
  admin.sync_limits({{"p", concurrency_limit({"a"}, 3)}}, "test");
  schema.insert_jobs("a", 300);
  schema.insert_jobs("free", 100);  // unlimited: must not be held back
  const ClaimersRun run = run_claimers(schema, 400, [](int t) {
    return claim_of(4, {"a", "free"}, "w" + std::to_string(t));
  });
  expect_exact(run, schema, 400, 3);
}

// Claims through the plain claim under one limit and through the limited claim, saying
// what they hold or not, all at once over one limit: never more than the limit in hand.
TEST(Limits, UnderOneLimitPlainAndLimitedClaimsHoldItExactlyTogether) {
  TestSchema schema;
  PgJobStore admin(schema.config().database, "test");
  admin.sync_limits({{"p", concurrency_limit({"a"}, 3)}}, "test");
  schema.insert_jobs("a", 400);
  const ClaimersRun run = run_claimers(schema, 400, [](int t) {
    ClaimRequest request = claim_of(4, {"a"}, "w" + std::to_string(t));
    request.one_concurrency_limit = t % 2 == 0;
    // A claimer completes its jobs before it claims again: it holds none then.
    request.own_running = t % 4 < 2 ? 0 : -1;
    return request;
  });
  expect_exact(run, schema, 400, 3);
}

// One second of four claimers taking turns at a rate limit's bucket (200/s, burst 20), in
// a schema of its own: what they claimed and what the bucket must at least have given.
struct BucketRun {
  int claimed = 0;
  int at_most = 0;
  int at_least = 0;
  double window = 0;  // seconds of refill the lower bound counts
  std::size_t claims = 0;
  bool told_to_wait = false;
  std::int64_t running = 0;
};

BucketRun run_bucket_claimers() {
  TestSchema schema;
  PgJobStore admin(schema.config().database, "test");
  constexpr double kRate = 200;
  constexpr int kBurst = 20;
  admin.sync_limits({{"r", rate_limit({"a"}, kRate, kBurst)}}, "test");
  schema.insert_jobs("a", 500);
  std::atomic<int> claimed{0};
  std::atomic<bool> told_to_wait{false};
  // The bounds come from when claims were actually made, not from a fixed window: under a
  // sanitizer on a loaded machine, connecting alone can take a good part of a second.
  std::mutex mutex;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> claims;  // begin, end
  std::optional<Clock::time_point> first_token;  // the first claim that got jobs returned
  std::latch connected(4);
  const auto start = Clock::now();
  std::vector<std::thread> claimers;
  for (int t = 0; t < 4; ++t) {
    claimers.emplace_back([&] {
      PgJobStore store(schema.config().database, "claimer");
      connected.arrive_and_wait();
      const auto from = Clock::now();
      while (Clock::now() - from < std::chrono::milliseconds(1000)) {
        const auto begin = Clock::now();
        // Room for the whole burst: a claim takes every whole token its bucket holds.
        const LimitedClaim claim = store.claim_limited(claim_of(2 * kBurst, {"a"}));
        const auto end = Clock::now();
        claimed.fetch_add(static_cast<int>(claim.jobs.size()));
        {
          const std::lock_guard lock(mutex);
          claims.emplace_back(begin, end);
          if (!claim.jobs.empty() && (!first_token || end < *first_token)) first_token = end;
        }
        for (const LimitHold& hold : claim.held) {
          if (hold.reason == "rate" && hold.retry_in &&
              *hold.retry_in <= std::chrono::milliseconds(100)) {
            told_to_wait = true;
          }
        }
      }
    });
  }
  for (auto& thread : claimers) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  BucketRun run;
  run.claimed = claimed.load();
  run.claims = claims.size();
  run.told_to_wait = told_to_wait.load();
  run.running = schema.count("status = 'running'");
  // At most the burst at once, then the rate per second since the first claim could start;
  // +1 for the token that refills while the last claim runs.
  run.at_most = kBurst + static_cast<int>(kRate * elapsed) + 1;
  if (!first_token) return run;
  // At least: the bucket was created full no later than the first claim that got jobs
  // returned, and every token refilled from then until the last claim began was claimed,
  // but for the fraction the last claim leaves and what a full bucket could not hold. A
  // take leaves less than one token, so the bucket is full again only after (burst - 1) /
  // rate with no take: counted for every gap between claims longer than that. A claim
  // takes its tokens at its transaction's start, somewhere between its begin and its end
  // as the client saw them, so the gap between two takes is at most from the earlier
  // claim's begin to the later one's end (a loaded machine delayed a transaction's start
  // past a gap between begins that looked short: 2 tokens of 212 lost). On a quiet machine
  // no such gap is long; on a loaded one this keeps the bound true.
  std::sort(claims.begin(), claims.end());
  const double fill_time = (kBurst - 1) / kRate;
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  double lost_to_full_bucket = 0;
  for (std::size_t i = 0; i < claims.size(); ++i) {
    const Clock::time_point earliest_take_before = i > 0 ? claims[i - 1].first : claims[i].first;
    lost_to_full_bucket +=
        std::max(0.0, seconds(claims[i].second - earliest_take_before) - fill_time);
  }
  run.window = seconds(claims.back().first - *first_token) - lost_to_full_bucket;
  run.at_least = kBurst + static_cast<int>(kRate * std::max(run.window, 0.0)) - 1;
  return run;
}

// The lower bound needs half a second of refill in which the claimers kept the bucket
// from filling up; on a loaded machine a run may not give that (slow claims count as time
// the bucket may have been full), and is then repeated, at most four times in all. The
// upper bound holds in every run.
TEST(Limits, ARateLimitCountsStartsWithATokenBucket) {
  BucketRun run;
  for (int attempt = 1; attempt <= 4; ++attempt) {
    run = run_bucket_claimers();
    EXPECT_LE(run.claimed, run.at_most) << "attempt " << attempt;
    EXPECT_EQ(run.running, run.claimed) << "attempt " << attempt;
    if (run.window >= 0.5) break;
  }
  ASSERT_GE(run.window, 0.5) << "the claimers got too few turns to measure the refill";
  EXPECT_GE(run.claimed, run.at_least)
      << "tokens were lost: " << run.window << " s of refill, " << run.claims << " claims";
  EXPECT_TRUE(run.told_to_wait) << "a held claim says when the next token is due (at most 1/rate)";
}

// A claim takes its tokens when it reads the bucket; what refills while it then holds the
// bucket (choosing and locking its jobs) is kept, up to the burst, also when it read the
// bucket full. At 1,000,000 tokens/s the few statements between the read and the write
// refill the 10 taken many times over, so the bucket is written back full. (Schema v11
// capped before taking and wrote back 20 - 10: on a loaded machine, where claims hold
// their bucket longer, a 200/s limit delivered less than its rate.)
TEST(Limits, TheRefillWhileAClaimHoldsItsBucketIsKept) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"r", rate_limit({"a"}, 1000000, 20)}}, "test");
  schema.insert_jobs("a", 50);
  ASSERT_EQ(store.claim_limited(claim_of(10, {"a"})).jobs.size(), 10u);
  EXPECT_GE(
      std::stod(schema.query("SELECT tokens FROM " + schema.qualified("pgjobd_limit_buckets") +
                             " WHERE limit_name = 'r'")),
      19.0);
}

// Jobs a claim takes beyond its daemon's free workers (worker.prefetch) start later than
// their tokens were taken: were the bucket to refill to its burst meanwhile, they and a
// full burst more could start at once. The refill stops at the burst less the held jobs,
// until a claim finds them ended (sql/functions/pgjobd_claim_limited.sql, "Prefetch under
// a rate limit"). The time a refill needs is made by moving the bucket's last refill back
// an hour. With one limit (the one-limit path) and beside a second one (the general path).
TEST(Limits, HeldJobsUnderARateLimitKeepTheBucketFromRefilling) {
  for (const bool alone : {true, false}) {
    SCOPED_TRACE(alone ? "one limit" : "two limits");
    TestSchema schema;
    PgJobStore store(schema.config().database, "test");
    std::map<std::string, LimitConfig> limits{{"r", rate_limit({"a"}, 1000, 10)}};
    if (!alone) limits.emplace("c", concurrency_limit({"a"}, 100));
    store.sync_limits(limits, "test");
    schema.insert_jobs("a", 40);
    const auto an_hour_passes = [&] {
      schema.exec("UPDATE " + schema.qualified("pgjobd_limit_buckets") +
                  " SET refilled_at = refilled_at - interval '1 hour'");
    };
    ClaimRequest prefetching = claim_of(10, {"a"});
    prefetching.startable = 2;
    const std::vector<Job> held = store.claim_limited(prefetching).jobs;
    ASSERT_EQ(held.size(), 10u) << "the burst";
    EXPECT_EQ(schema.count("prefetched"), 10) << "a claim beyond its startable marks its jobs";
    an_hour_passes();
    ClaimRequest starting = claim_of(10, {"a"});
    starting.startable = 10;
    const LimitedClaim next = store.claim_limited(starting);
    EXPECT_TRUE(next.jobs.empty())
        << "10 held jobs and " << next.jobs.size() << " more could start at once, a burst of 10";
    ASSERT_EQ(next.held.size(), 1u);
    EXPECT_EQ(next.held[0].reason, "rate");
    store.complete(done_all(held), "w", false);
    an_hour_passes();
    EXPECT_TRUE(store.claim_limited(starting).jobs.empty())
        << "the held jobs' hour counts as held: this claim learns that they ended";
    an_hour_passes();
    EXPECT_EQ(store.claim_limited(starting).jobs.size(), 10u) << "the refill is whole again";
    EXPECT_EQ(schema.count("prefetched AND status = 'running'"), 0)
        << "a claim that starts all it takes marks none";
  }
}

TEST(Limits, AKeyedLimitGivesEachValueItsOwnPartitionAndNoHeadOfLineBlocking) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"per_user", concurrency_limit({"sync"}, 1, "user")}}, "test");
  insert_keyed(schema, "sync", "a", 1000);  // first in claim order
  insert_keyed(schema, "sync", "b", 1);
  schema.exec(
      "INSERT INTO {jobs} (type, payload) VALUES ('sync', '{}'), ('sync', '[1, 2]'), "
      "('other', '{}')");

  const LimitedClaim first = store.claim_limited(claim_of(10, {"sync", "other"}));
  std::map<std::string, int> by_user;
  for (const Job& job : first.jobs) ++by_user[job.type == "other" ? "other" : job.payload];
  EXPECT_EQ(by_user["{\"user\": \"a\"}"], 1);
  EXPECT_EQ(by_user["{\"user\": \"b\"}"], 1) << "b's job waited behind a's 1,000";
  EXPECT_EQ(by_user["other"], 1);
  // A payload without the field (an object without it, or not an object) shares one
  // partition: one of the two.
  EXPECT_EQ(by_user["{}"] + by_user["[1, 2]"], 1);
  EXPECT_EQ(first.jobs.size(), 4U);
  ASSERT_EQ(first.held.size(), 1U);
  EXPECT_EQ(first.held[0].limit, "per_user");
  EXPECT_EQ(first.held[0].reason, "concurrency");
  EXPECT_FALSE(first.held[0].retry_in);

  EXPECT_TRUE(store.claim_limited(claim_of(10, {"sync", "other"})).jobs.empty());
  const auto usage = store.limit_usage();
  ASSERT_EQ(usage.size(), 1U);
  EXPECT_EQ(usage[0].running, 3);
  EXPECT_EQ(usage[0].partitions, 3);
}

// A keyed concurrency limit's claim over more partitions than the 128 it could lock one by
// one takes the limit's lock instead: through the one keyed limit's claim (only its type
// served) and through the general path (a type it does not limit served as well).
TEST(Limits, AKeyedClaimOverAThousandPartitionsIsNotCutAt128) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"per_user", concurrency_limit({"a"}, 1, "user")}}, "test");
  insert_spread(schema, 1000, 3000);
  for (const std::vector<std::string>& types :
       {std::vector<std::string>{"a"}, std::vector<std::string>{"a", "free"}}) {
    const LimitedClaim claim = store.claim_limited(claim_of(2000, types));
    std::set<std::string> users;
    for (const Job& job : claim.jobs) users.insert(job.payload);
    EXPECT_EQ(claim.jobs.size(), 1000U) << types.size() << " type(s) served";
    EXPECT_EQ(users.size(), claim.jobs.size()) << "a partition took two places of one";
    EXPECT_TRUE(store.claim_limited(claim_of(2000, types)).jobs.empty())
        << "every partition is full";
    store.complete(done_all(claim.jobs), "w", false);
  }
}

// Claims of the one keyed limit (its lock exclusively), claims through the general path
// over a few partitions (the limit's lock shared, then each partition's) and over more than
// 128 when there are so many keys (the limit's lock exclusively when free, else shared), all
// at once: no key ever runs more than its limit. Counted as
// ConcurrencyHoldsExactlyUnderManyConcurrentClaimers counts. Over 40 keys the one limit's
// claims meet each other's keys more often; over 200, the widest claims take the lock.
TEST(Limits, AKeyedLimitHoldsExactlyUnderConcurrentClaimsOverManyKeys) {
  for (const int keys : {40, 200}) {
    TestSchema schema;
    PgJobStore admin(schema.config().database, "test");
    constexpr int kLimit = 2;
    admin.sync_limits({{"per_user", concurrency_limit({"a"}, kLimit, "user")}}, "test");
    insert_spread(schema, keys, 2000);
    schema.insert_jobs("free", 100);
    constexpr int kJobs = 2100;
    std::mutex mutex;
    std::map<std::string, int> in_hand;
    int most = 0;
    std::map<std::int64_t, int> times_claimed;
    int stale = 0;
    std::atomic<int> done{0};
    std::vector<std::thread> claimers;
    for (int t = 0; t < 12; ++t) {
      claimers.emplace_back([&, t] {
        PgJobStore store(schema.config().database, "claimer");
        const std::string worker = "w" + std::to_string(t);
        const std::vector<std::vector<std::string>> served{
            {"a"}, {"a", "free"}, {"a", "free"}, {"a", "free"}};
        const int n[] = {40, 6, 30, keys + 100};
        const auto deadline = Clock::now() + std::chrono::seconds(90);
        while (done.load() < kJobs && Clock::now() < deadline) {
          const LimitedClaim claim = store.claim_limited(claim_of(n[t % 4], served[t % 4], worker));
          {
            const std::lock_guard lock(mutex);
            for (const Job& job : claim.jobs) {
              if (job.type == "a") most = std::max(most, ++in_hand[job.payload]);
            }
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(claim.jobs.empty() ? 1 : 3));
          {
            const std::lock_guard lock(mutex);
            for (const Job& job : claim.jobs) {
              if (job.type == "a") --in_hand[job.payload];
            }
          }
          const int fenced = complete_all(store, claim.jobs, worker);
          {
            const std::lock_guard lock(mutex);
            for (const Job& job : claim.jobs) ++times_claimed[job.id];
            stale += fenced;
          }
          done.fetch_add(static_cast<int>(claim.jobs.size()));
        }
      });
    }
    for (auto& thread : claimers) thread.join();
    int twice = 0;
    for (const auto& [id, n] : times_claimed) twice += n > 1 ? 1 : 0;
    EXPECT_EQ(twice, 0) << keys << " keys: jobs claimed twice";
    EXPECT_EQ(stale, 0) << keys << " keys: a job claimed twice had its first completion fenced off";
    EXPECT_EQ(done.load(), kJobs) << keys << " keys\n" << testing::table_summary(schema);
    EXPECT_LE(most, kLimit) << keys << " keys";
    EXPECT_EQ(most, kLimit) << keys << " keys: the limit was never used in full";
    EXPECT_EQ(schema.count("status = 'done'"), kJobs) << keys << " keys";
  }
}

// A partition is busy while a job of it runs: none when nothing runs (the LEFT JOIN's row
// of NULLs is no partition, though pgjobd_limit_part(NULL, key) is ''), one per key value
// running, and for an unkeyed limit one for all.
TEST(Limits, UsageCountsOnlyPartitionsWithARunningJob) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"per_user", concurrency_limit({"sync"}, 1, "user")},
                     {"partner", concurrency_limit({"call"}, 2)},
                     {"mail", rate_limit({"mail"}, 1, 1)}},
                    "test");
  const auto usage_of = [&] {
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> out;
    for (const LimitUsage& use : store.limit_usage()) out[use.name] = {use.running, use.partitions};
    return out;
  };
  using Use = std::pair<std::int64_t, std::int64_t>;
  auto idle = usage_of();
  EXPECT_EQ(idle["per_user"], Use(0, 0));
  EXPECT_EQ(idle["partner"], Use(0, 0));
  EXPECT_EQ(idle["mail"], Use(0, 0));

  insert_keyed(schema, "sync", "a", 2);
  insert_keyed(schema, "sync", "b", 2);
  schema.insert_jobs("call", 1);
  ASSERT_EQ(store.claim_limited(claim_of(10, {"sync", "call"})).jobs.size(), 3U);
  auto busy = usage_of();
  EXPECT_EQ(busy["per_user"], Use(2, 2));
  EXPECT_EQ(busy["partner"], Use(1, 1));
  EXPECT_EQ(busy["mail"], Use(0, 0));
}

TEST(Limits, PartitionsTakeTurns) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"per_user", concurrency_limit({"sync"}, 100, "user")}}, "test");
  insert_keyed(schema, "sync", "a", 100);  // all of a's are due first
  insert_keyed(schema, "sync", "b", 100);
  insert_keyed(schema, "sync", "c", 100);
  const LimitedClaim claim = store.claim_limited(claim_of(9, {"sync"}));
  std::map<std::string, int> by_user;
  for (const Job& job : claim.jobs) ++by_user[job.payload];
  EXPECT_EQ(by_user.size(), 3U) << "a's backlog starved b and c";
  for (const auto& [user, n] : by_user) EXPECT_EQ(n, 3) << user;
}

TEST(Limits, APartitionAloneStillFillsTheClaim) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"per_user", concurrency_limit({"sync"}, 100, "user")}}, "test");
  insert_keyed(schema, "sync", "a", 50);
  EXPECT_EQ(store.claim_limited(claim_of(20, {"sync"})).jobs.size(), 20U)
      << "its turn is a quarter of the claim only while others wait";
}

TEST(Limits, EverythingThatEndsAnAttemptFreesItsPlaceAndAStaleOwnerHoldsNothing) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"p", concurrency_limit({"a"}, 2)}}, "test");
  schema.insert_jobs("a", 10);
  auto held = store.claim_limited(claim_of(10, {"a"}, "w1")).jobs;
  ASSERT_EQ(held.size(), 2U);
  EXPECT_TRUE(store.claim_limited(claim_of(10, {"a"})).jobs.empty());

  // A completion frees its place.
  store.complete(done_all({held[0]}), "w1", false);
  auto next = store.claim_limited(claim_of(10, {"a"}, "w2")).jobs;
  ASSERT_EQ(next.size(), 1U);

  // A deleted running row frees its place: nothing needs to release it.
  schema.exec("DELETE FROM {jobs} WHERE id = " + std::to_string(next[0].id));
  next = store.claim_limited(claim_of(10, {"a"}, "w2")).jobs;
  ASSERT_EQ(next.size(), 1U);

  // w1's daemon died: its lease expires and the rescue frees the place; the job is retried
  // by another daemon with a new attempt, which counts once.
  schema.exec("UPDATE {jobs} SET locked_until = now() - interval '1 second' WHERE id = " +
              std::to_string(held[1].id));
  RetryConfig retry;
  retry.base = Millis(0);
  retry.jitter = 0;
  ASSERT_EQ(store.lead_and_rescue("leader", Millis(10000), retry, 100).failed, 1);
  const auto retried = store.claim_limited(claim_of(10, {"a"}, "w3")).jobs;
  ASSERT_EQ(retried.size(), 1U);
  EXPECT_TRUE(store.claim_limited(claim_of(10, {"a"})).jobs.empty()) << "still 2 running";

  // The stale owner's completion is fenced off and frees nothing.
  EXPECT_EQ(store.complete(done_all({held[1]}), "w1", false).stale, 1);
  EXPECT_TRUE(store.claim_limited(claim_of(10, {"a"})).jobs.empty());
  EXPECT_EQ(schema.count("status = 'running'"), 2);
}

TEST(Limits, ChangingALimitsKeyStartsItsPartitionsAfreshLoweringItLetsRunningJobsFinish) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"p", concurrency_limit({"a"}, 3)}}, "test");
  schema.insert_jobs("a", 10);
  ASSERT_EQ(store.claim_limited(claim_of(10, {"a"})).jobs.size(), 3U);
  store.sync_limits({{"p", concurrency_limit({"a"}, 1)}}, "test");
  EXPECT_TRUE(store.claim_limited(claim_of(10, {"a"})).jobs.empty());
  EXPECT_EQ(schema.count("status = 'running'"), 3) << "lowering a limit stops nothing";
  // One finishes, but two still run, above the new limit: nothing starts.
  schema.exec(
      "UPDATE {jobs} SET status = 'done' WHERE id = (SELECT min(id) FROM {jobs} "
      "WHERE status = 'running')");
  EXPECT_TRUE(store.claim_limited(claim_of(10, {"a"})).jobs.empty())
      << "a job started beside jobs held above the lowered limit";
  schema.exec("UPDATE {jobs} SET status = 'done' WHERE status = 'running'");
  EXPECT_EQ(store.claim_limited(claim_of(10, {"a"})).jobs.size(), 1U);
  // Keyed now: the running job counts in the partition its payload falls in under the new
  // key (no `user`: the shared one), and a user's job has a partition of its own.
  store.sync_limits({{"p", concurrency_limit({"a"}, 1, "user")}}, "test");
  EXPECT_TRUE(store.claim_limited(claim_of(10, {"a"})).jobs.empty());
  insert_keyed(schema, "a", "x", 2);
  const auto keyed = store.claim_limited(claim_of(10, {"a"})).jobs;
  ASSERT_EQ(keyed.size(), 1U);
  EXPECT_EQ(keyed[0].payload, "{\"user\": \"x\"}");
}

TEST(Limits, AHostilePayloadValueCannotBreakTheClaim) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  LimitConfig per_user_rate = rate_limit({"sync"}, 1000, 1000);
  per_user_rate.key = "user";
  store.sync_limits(
      {{"per_user", concurrency_limit({"sync"}, 1, "user")}, {"per_user_rate", per_user_rate}},
      "test");
  // A 1 MB key value: over the btree limit if it were stored whole in a bucket's key.
  schema.exec(
      "INSERT INTO {jobs} (type, payload) SELECT 'sync', jsonb_build_object('user', "
      "repeat('x', 1000000) || g) FROM generate_series(1, 2) g");
  schema.exec(
      "INSERT INTO {jobs} (type, payload) VALUES ('sync', '\"just a string\"'), "
      "('sync', 'null'), ('sync', '{\"user\": null}'), ('sync', '{\"user\": {\"a\": 1}}')");
  const auto jobs = store.claim_limited(claim_of(10, {"sync"})).jobs;
  // Two distinct long values, the shared partition (string, null payloads), JSON null, and
  // an object value.
  EXPECT_EQ(jobs.size(), 5U);
  EXPECT_EQ(schema.query("SELECT count(*) FILTER (WHERE octet_length(part) < 300) || '/' || "
                         "count(*) FROM " +
                         schema.qualified("pgjobd_limit_buckets")),
            "5/5");
}

TEST(Limits, IdleBucketsAreCleanedUpAndBusyOnesKept) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  LimitConfig per_user = rate_limit({"sync"}, 100, 1);
  per_user.key = "user";
  store.sync_limits({{"per_user", per_user}, {"mail", rate_limit({"mail"}, 1, 1)}}, "test");
  insert_keyed(schema, "sync", "a", 1);
  insert_keyed(schema, "sync", "b", 1);
  schema.exec("INSERT INTO {jobs} (type, payload) VALUES ('mail', '{}')");
  ASSERT_EQ(store.claim_limited(claim_of(10, {"sync", "mail"})).jobs.size(), 3U);
  EXPECT_EQ(schema.query("SELECT count(*) FROM " + schema.qualified("pgjobd_limit_buckets")), "3");
  // As if an hour went by for b's bucket and the unkeyed one; a's was just used.
  schema.exec("UPDATE " + schema.qualified("pgjobd_limit_buckets") +
              " SET refilled_at = refilled_at - interval '1 hour' WHERE part <> '\"a\"'");
  EXPECT_EQ(store.collect_limit_garbage(Millis(600000), 100), 1);  // b's, full again
  EXPECT_EQ(schema.query("SELECT string_agg(limit_name || ':' || part, ',' ORDER BY part) FROM " +
                         schema.qualified("pgjobd_limit_buckets")),
            "mail:,per_user:\"a\"")
      << "an unkeyed bucket stays, and a busy keyed one";
}

// Two claimers never count the same room: while one claims in a partition (its
// transaction holds the partition's lock), another leaves that partition out and is told to
// ask again shortly; once the first commits, the second sees its jobs running.
TEST(Limits, APartitionBeingClaimedInIsLeftOutAndCountedOnceCommitted) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"p", concurrency_limit({"a"}, 3)}}, "test");
  schema.insert_jobs("a", 10);
  schema.insert_jobs("b", 1);
  auto conn = open_connection(schema.config().database, "test");
  pqxx::work first(*conn);
  EXPECT_EQ(first
                .exec("SELECT count(job_id) FROM " + quote_identifier(schema.name()) +
                      ".pgjobd_claim_limited('{default}', '{2}', '{a}', 2, 'w1', 30000, '', "
                      "1000000)")[0][0]
                .as<int>(),
            2);
  const LimitedClaim meanwhile = store.claim_limited(claim_of(10, {"a", "b"}, "w2"));
  ASSERT_EQ(meanwhile.jobs.size(), 1U) << "an unlimited job is not held back";
  EXPECT_EQ(meanwhile.jobs[0].type, "b");
  ASSERT_EQ(meanwhile.held.size(), 1U);
  EXPECT_EQ(meanwhile.held[0].limit, "p");
  EXPECT_EQ(meanwhile.held[0].reason, "concurrency");
  ASSERT_TRUE(meanwhile.held[0].retry_in);
  EXPECT_LE(*meanwhile.held[0].retry_in, std::chrono::milliseconds(10));
  first.commit();
  EXPECT_EQ(store.claim_limited(claim_of(10, {"a"}, "w2")).jobs.size(), 1U)
      << "the first claim's two running jobs count: one place is left";
  EXPECT_EQ(schema.count("status = 'running' AND type = 'a'"), 3);
}

// The claim's reads, counted by PostgreSQL itself within one transaction: next to a
// million finished rows it reads a handful of index entries, never the table.
TEST(Limits, TheLimitedClaimReadsFewRowsNextToAMillionFinishedOnes) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"per_user", concurrency_limit({"sync"}, 1, "user")}}, "test");
  schema.exec(
      "INSERT INTO {jobs} (type, status, attempts, finished_at, payload) "
      "SELECT 'sync', 'done', 1, now(), jsonb_build_object('user', 'u' || g % 1000) "
      "FROM generate_series(1, 1000000) g");
  insert_keyed(schema, "sync", "a", 20);
  insert_keyed(schema, "sync", "b", 20);
  schema.exec("ANALYZE {jobs}");
  DatabaseConfig config = schema.config().database;
  auto conn = open_connection(config, "test");
  pqxx::work txn(*conn);
  // Seven claims: PL/pgSQL plans its statements afresh five times, then may keep a
  // generic plan; both must stay off the finished rows.
  int claimed = 0;
  for (int i = 0; i < 7; ++i) {
    claimed += txn.exec("SELECT count(job_id) FROM " + quote_identifier(schema.name()) +
                        ".pgjobd_claim_limited('{default}', '{10}', '{sync}', 10, 'w', 30000, "
                        "'', 1000000)")[0][0]
                   .as<int>();
  }
  EXPECT_EQ(claimed, 2) << "one per user: a's and b's first";
  const auto [seq_scans, fetched] = reads_of_jobs(txn, schema.name());
  EXPECT_EQ(seq_scans, 0) << "a sequential scan of jobs";
  EXPECT_LT(fetched, 7 * 200) << "index rows fetched by seven claims";
  txn.abort();
}

// Unkeyed limits only: a job's partitions follow from its type and queue, so the claim reads
// the first due jobs of each served type (by the index by type) and nothing past them. At a
// reached limit of type a, with 3,000 due jobs of a ahead of 3 of the unlimited type b, it
// claims b's and reads a few dozen rows. (Reading a queue's due jobs in claim order, it
// read 2,000 of a's past before giving up, and b's waited for a's backlog to shrink.)
TEST(Limits, AnUnkeyedLimitReachedIsNotReadPast) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"partner", concurrency_limit({"a"}, 5)}}, "test");
  const std::string claim = limited_claim(schema, "{a,b}", 10);
  schema.insert_jobs("a", 5);
  auto conn = open_connection(schema.config().database, "test");
  EXPECT_EQ(claim_committed(*conn, claim), 5);
  schema.insert_jobs("a", 3000);
  schema.insert_jobs("b", 3);
  schema.exec("ANALYZE {jobs}");
  pqxx::work txn(*conn);
  const auto [seq_before, fetched_before] = reads_of_jobs(txn, schema.name());
  EXPECT_EQ(txn.exec(claim)[0][0].as<int>(), 3) << "b's three, none of a's";
  const auto [seq_after, fetched_after] = reads_of_jobs(txn, schema.name());
  EXPECT_EQ(seq_after - seq_before, 0) << "a sequential scan of jobs";
  EXPECT_LT(fetched_after - fetched_before, 100) << "rows fetched through indexes";
  txn.abort();
}

// A limit on a queue is one partition over every type in it: the claim that reads each
// type's first jobs apart still takes no more than the partition's room in all.
TEST(Limits, AnUnkeyedPartitionOverSeveralTypesHoldsExactly) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  LimitConfig on_queue;
  on_queue.queues = {"default"};
  on_queue.concurrency = 3;
  store.sync_limits({{"queue", on_queue}}, "test");
  schema.insert_jobs("a", 5);
  schema.insert_jobs("b", 5);
  const std::vector<Job> first = store.claim_limited(claim_of(10, {"a", "b"})).jobs;
  ASSERT_EQ(first.size(), 3u);
  EXPECT_TRUE(store.claim_limited(claim_of(10, {"a", "b"})).jobs.empty()) << "the limit reached";
  store.complete(done_all({first[0]}), "w", false);
  EXPECT_EQ(store.claim_limited(claim_of(10, {"a", "b"})).jobs.size(), 1u);
}

// PL/pgSQL keeps a session's plans: a daemon that first claimed while the table was nearly
// empty must not keep reading it as if it were once it has grown (sql/011). Counted by
// PostgreSQL within the transaction of one claim of 1,000 from a backlog of 100,000, after
// `warm` claims next to 5 rows on the same session.
void expect_the_claim_stays_on_the_indexes(TestSchema& schema, int warm) {
  const std::string claim = limited_claim(schema, "{a}", 1000);
  schema.insert_jobs("a", 5);
  auto conn = open_connection(schema.config().database, "test");
  EXPECT_EQ(claim_committed(*conn, claim), 5);
  for (int i = 1; i < warm; ++i) claim_committed(*conn, claim);
  schema.insert_jobs("a", 100000);
  pqxx::work txn(*conn);
  // The counts before and after the claim: the view may still hold the first claim's.
  const auto [seq_before, fetched_before] = reads_of_jobs(txn, schema.name());
  EXPECT_EQ(txn.exec(claim)[0][0].as<int>(), 1000);
  const auto [seq_after, fetched_after] = reads_of_jobs(txn, schema.name());
  EXPECT_EQ(seq_after - seq_before, 0) << "a sequential scan of jobs";
  EXPECT_LT(fetched_after - fetched_before, 10000) << "rows fetched through indexes";
  txn.abort();
}

// Two limits: the general path.
TEST(Limits, TheLimitedClaimStaysOnTheIndexesAfterTheTableGrewUnderItsSession) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits(
      {{"many", concurrency_limit({"a"}, 100000)}, {"fast", rate_limit({"a"}, 1000000, 100000)}},
      "test");
  expect_the_claim_stays_on_the_indexes(schema, 1);
}

// The one-limit path (a single unkeyed limit over every served type), with a limit that
// has both a concurrency and a rate, past PL/pgSQL's first custom plans.
TEST(Limits, TheOneLimitClaimStaysOnTheIndexesAfterTheTableGrewUnderItsSession) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  LimitConfig both = rate_limit({"a"}, 1000000, 100000);
  both.concurrency = 100000;
  store.sync_limits({{"both", both}}, "test");
  expect_the_claim_stays_on_the_indexes(schema, 6);
}

// With one unkeyed limit over every served type the claim is the plain claim's, cut at the
// partition's room: a few statements instead of the general path's dozen, which is what a
// claim's fixed cost was (bench/README.md, "Limited jobs against unlimited ones"). Counted
// by PostgreSQL as the statements' reads of pgjobd_limits (scans of it, by any path): two
// (the limits' shape, the one limit), where the general path reads it in most of its
// statements.
TEST(Limits, TheOneLimitClaimIsAFewStatements) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"c", concurrency_limit({"a"}, 5000)}}, "test");
  schema.insert_jobs("a", 3000);
  const std::string claim = limited_claim(schema, "{a}", 1000);
  auto conn = open_connection(schema.config().database, "test");
  pqxx::work txn(*conn);
  const auto before = scans_of_limits(txn, schema.name());
  EXPECT_EQ(txn.exec(claim)[0][0].as<int>(), 1000);
  const auto after = scans_of_limits(txn, schema.name());
  EXPECT_LE(after - before, 2) << "scans of pgjobd_limits by one claim";
  EXPECT_EQ(schema.count("status = 'running'"), 0) << "not committed yet";
  txn.abort();
}

// One keyed limit over 1,000 keys: a choice within every partition's room is the claim,
// whether the limit's running jobs and the choice stay within the limit (nothing counted
// per partition) or not (the choice's partitions counted): the statements of the one limit's
// claim, counted by the scans of pgjobd_limits (2 per claim, 6 through the general path).
TEST(Limits, TheOneKeyedLimitClaimIsAFewStatements) {
  TestSchema schema;
  PgJobStore store(schema.config().database, "test");
  store.sync_limits({{"per_user", concurrency_limit({"a"}, 5, "user")}}, "test");
  insert_spread(schema, 1000, 3000);
  const std::string claim = limited_claim(schema, "{a}", 1000);
  auto conn = open_connection(schema.config().database, "test");
  for (int round = 0; round < 2; ++round) {
    pqxx::work txn(*conn);
    const auto before = scans_of_limits(txn, schema.name());
    EXPECT_EQ(txn.exec(claim)[0][0].as<int>(), 1000) << "round " << round;
    const auto after = scans_of_limits(txn, schema.name());
    EXPECT_LE(after - before, 2) << "scans of pgjobd_limits by one claim, round " << round;
    txn.commit();
  }
  EXPECT_EQ(schema.count("status = 'running'"), 2000);
  EXPECT_EQ(schema.count("status = 'running' AND payload ->> 'user' = '7'"), 2)
      << "claim order is the keys' order: each claim took one job of each";
}

// The one keyed limit's claim counts the running jobs of each partition it chose when the
// limit's running jobs and the choice pass the limit (here through the jobs running in ten
// other partitions; sql/functions/pgjobd_claim_limited.sql, One keyed limit): a partition
// already at its limit gets nothing, whatever its value, a payload without it, or a payload
// over 8 kB (whose partition may be kept aside). Values are partitions by their JSON text:
// 1 and 1.0 are two.
TEST(Limits, TheOneKeyedLimitsClaimCountsTheRunningJobsOfEachPartitionItChose) {
  // An 8 kB field that does not compress: the payload stays over 8 kB stored.
  const std::string large = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 400) g)";
  struct Case {
    const char* what;
    std::string running;     // the full partition's running jobs' payload (SQL)
    std::string chosen;      // the pending job of that partition
    std::string other_form;  // a pending job whose value is equal but written otherwise, or ""
  };
  const std::vector<Case> cases{
      {"a string value", "jsonb_build_object('user', 'x')", "jsonb_build_object('user', 'x')", ""},
      {"a number", "jsonb_build_object('user', 1)", "jsonb_build_object('user', 1)",
       "jsonb_build_object('user', 1.0)"},
      {"no value", "'{}'::jsonb", "'[1]'::jsonb", ""},
      {"running jobs with payloads over 8 kB",
       "jsonb_build_object('user', 'x', 'pad', " + large + ")", "jsonb_build_object('user', 'x')",
       ""},
      {"a chosen job with a payload over 8 kB", "jsonb_build_object('user', 'x')",
       "jsonb_build_object('user', 'x', 'pad', " + large + ")", ""},
  };
  for (const Case& c : cases) {
    TestSchema schema;
    PgJobStore store(schema.config().database, "test");
    store.sync_limits({{"per_user", concurrency_limit({"a"}, 2, "user")}}, "test");
    // The full partition's two running jobs, and one in each of ten others: 12 running.
    schema.exec(
        "INSERT INTO {jobs} (type, payload, status, attempts, locked_by, locked_until, "
        "started_at) SELECT 'a', CASE WHEN g <= 2 THEN " +
        c.running +
        " ELSE jsonb_build_object('user', 'filler' || g) END, 'running', 1, 'another', "
        "now() + interval '1 hour', now() FROM generate_series(1, 12) g");
    schema.exec("INSERT INTO {jobs} (type, payload, priority) VALUES ('a', " + c.chosen +
                ", 2), ('a', jsonb_build_object('user', 'y'), 1)");
    if (!c.other_form.empty()) {
      schema.exec("INSERT INTO {jobs} (type, payload) VALUES ('a', " + c.other_form + ")");
    }
    const LimitedClaim claim = store.claim_limited(claim_of(10, {"a"}));
    std::set<std::string> claimed;
    for (const Job& job : claim.jobs) claimed.insert(job.payload);
    const std::string part = schema.qualified("pgjobd_limit_part") + "(payload, 'user')";
    EXPECT_EQ(schema.count("status = 'running' AND locked_by <> 'another' AND " + part +
                           " = (SELECT " + part + " FROM {jobs} ORDER BY id LIMIT 1)"),
              0)
        << c.what << ": the full partition got a job";
    EXPECT_EQ(claimed.count("{\"user\": \"y\"}"), 1U) << c.what << ": y's job was not claimed";
    EXPECT_EQ(claim.jobs.size(), c.other_form.empty() ? 1U : 2U)
        << c.what << ": a value of another form is another partition";
  }
}

// Under limits too, a claim takes nothing from a paused queue and no more from a queue than
// its free slots, through each way pgjobd_claim_limited claims: the one limit's claim from
// one queue and one type, from several types, a keyed one, and the general path (two limits).
TEST(Limits, AClaimUnderLimitsSkipsAPausedQueueAndKeepsToEachQueuesSlots) {
  struct Case {
    const char* what;
    std::map<std::string, LimitConfig> limits;
    std::vector<std::string> types;
  };
  const std::vector<Case> cases{
      {"one rate limit, one type", {{"r", rate_limit({"a"}, 1000, 1000)}}, {"a"}},
      {"one rate limit, two types", {{"r", rate_limit({"a", "b"}, 1000, 1000)}}, {"a", "b"}},
      {"one keyed limit", {{"k", concurrency_limit({"a"}, 100, "user")}}, {"a"}},
      {"two limits",
       {{"r", rate_limit({"a"}, 1000, 1000)}, {"c", concurrency_limit({"a"}, 100)}},
       {"a"}},
  };
  for (const Case& c : cases) {
    TestSchema schema;
    PgJobStore store(schema.config().database, "test");
    store.sync_limits(c.limits, "test");
    schema.exec(
        "INSERT INTO {jobs} (type, queue, payload) SELECT 'a', q, jsonb_build_object('user', g) "
        "FROM unnest(ARRAY['mail', 'default']) AS q, generate_series(1, 10) AS g");
    schema.exec("SELECT " + schema.qualified("pgjobd_pause_queue") + "('mail')");

    EXPECT_TRUE(store.claim_limited(claim_of(10, c.types, "w", "mail")).jobs.empty())
        << c.what << ": a job of the paused queue was claimed";
    const ClaimRequest both{{{"mail", 10}, {"default", 3}}, c.types, 10, "w", testing::kLease};
    const LimitedClaim claim = store.claim_limited(both);
    EXPECT_EQ(claim.jobs.size(), 3U) << c.what << ": the default queue has 3 free slots";
    for (const Job& job : claim.jobs) EXPECT_EQ(job.queue, "default") << c.what;
    const ClaimRequest one{{{"default", 2}}, c.types, 10, "w", testing::kLease};
    EXPECT_EQ(store.claim_limited(one).jobs.size(), 2U) << c.what << ": one queue, 2 free slots";
  }
}

}  // namespace
}  // namespace pgjobd
