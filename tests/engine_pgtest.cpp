// The engine with in-process handlers against PostgreSQL: slots, retries, failures,
// draining and releasing.

#include "pgjobd/engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <vector>

#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd {
namespace {

using testing::TestSchema;
using testing::wait_until;
using namespace std::chrono_literals;

// A gate handlers block on until the test opens it.
class Gate {
 public:
  void wait(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, stop, [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any cv_;
  bool open_ = false;
};

TEST(Engine, RunsInProcessHandlersToDone) {
  TestSchema schema;
  schema.insert_jobs("count", 500);
  std::mutex mutex;
  std::multiset<std::string> payloads;
  Engine engine(schema.config());
  engine.register_handler("count", [&](const Job& job, std::stop_token) {
    std::lock_guard lock(mutex);
    payloads.insert(job.payload);
    return JobResult::done();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 500; }, 30s));
  engine.drain();
  EXPECT_EQ(payloads.size(), 500u);
  EXPECT_EQ(std::set<std::string>(payloads.begin(), payloads.end()).size(), 500u);
}

TEST(Engine, NeverClaimsMoreThanFreeSlots) {
  TestSchema schema;
  schema.insert_jobs("slow", 40);
  schema.insert_jobs("slow", 40, "mail");
  Config config = schema.config();
  config.worker.concurrency = 6;
  config.worker.queues = {{"default", {}}, {"mail", {2}}};
  std::atomic<int> running{0}, max_running{0}, max_mail{0};
  std::atomic<int> mail_running{0};
  Engine engine(config);
  engine.register_handler("slow", [&](const Job& job, std::stop_token) {
    const int now = ++running;
    int seen = max_running.load();
    while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
    }
    if (job.queue == "mail") {
      const int m = ++mail_running;
      int seen_mail = max_mail.load();
      while (m > seen_mail && !max_mail.compare_exchange_weak(seen_mail, m)) {
      }
    }
    std::this_thread::sleep_for(5ms);  // the work itself, not synchronisation
    if (job.queue == "mail") --mail_running;
    --running;
    return JobResult::done();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 80; }, 60s));
  engine.drain();
  EXPECT_LE(max_running.load(), 6);
  EXPECT_LE(max_mail.load(), 2);
  EXPECT_GE(max_running.load(), 2);  // it did run jobs in parallel
}

TEST(Engine, ClaimsNothingWhileEverySlotIsBusy) {
  TestSchema schema;
  schema.insert_jobs("gated", 20);
  schema.insert_jobs("gated", 20, "mail");
  Config config = schema.config();
  config.worker.concurrency = 6;
  config.worker.queues = {{"default", {}}, {"mail", {2}}};
  Gate gate;
  Engine engine(config);
  engine.register_handler("gated", [&](const Job&, std::stop_token stop) {
    gate.wait(stop);
    return JobResult::done();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return engine.busy_workers() == 6; }, 30s));
  // The fetcher is woken repeatedly and polls every 10-200 ms; over a window of several
  // poll intervals it must not claim a seventh job (this checks an absence, so it is a
  // bounded observation rather than a wait for a condition).
  for (int i = 0; i < 30; ++i) {
    engine.wake();
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(schema.count("status = 'running'"), 6);
  EXPECT_LE(schema.count("status = 'running' AND queue = 'mail'"), 2);
  gate.open();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 40; }, 60s));
  engine.drain();
}

TEST(Engine, FailedJobsRetryWithBackoffThenDie) {
  TestSchema schema;
  schema.exec("INSERT INTO {jobs} (type, max_attempts) VALUES ('flaky', 3), ('boom', 3)");
  std::atomic<int> flaky_calls{0};
  Engine engine(schema.config());
  engine.register_handler("flaky", [&](const Job& job, std::stop_token) {
    ++flaky_calls;
    return job.attempt < 2 ? JobResult::retry("not yet") : JobResult::done();
  });
  engine.register_handler(
      "boom", [&](const Job&, std::stop_token) -> JobResult { throw std::runtime_error("kaput"); });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return schema.count("status IN ('done', 'dead')") == 2; }, 30s));
  engine.drain();
  EXPECT_EQ(flaky_calls.load(), 2);
  EXPECT_EQ(schema.query("SELECT status || ' ' || attempts || ' ' || jsonb_array_length(errors) "
                         "FROM {jobs} WHERE type = 'flaky'"),
            "done 2 1");
  EXPECT_EQ(schema.query("SELECT status || ' ' || attempts || ' ' || jsonb_array_length(errors) "
                         "|| ' ' || last_error FROM {jobs} WHERE type = 'boom'"),
            "dead 3 3 handler threw: kaput");
}

TEST(Engine, PermanentFailureIsDeadAtOnce) {
  TestSchema schema;
  schema.insert_jobs("bad", 1);
  Engine engine(schema.config());
  engine.register_handler(
      "bad", [](const Job&, std::stop_token) { return JobResult::dead("invalid payload"); });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 1; }, 30s));
  engine.drain();
  EXPECT_EQ(schema.query("SELECT attempts || ' ' || last_error FROM {jobs}"), "1 invalid payload");
}

TEST(Engine, UnknownTypesStayPending) {
  TestSchema schema;
  schema.insert_jobs("known", 5);
  schema.insert_jobs("mystery", 5);
  Engine engine(schema.config());
  engine.register_handler("known", [](const Job&, std::stop_token) { return JobResult::done(); });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 5; }, 30s));
  engine.drain();
  EXPECT_EQ(schema.count("type = 'mystery' AND status = 'pending' AND attempts = 0"), 5);
}

TEST(Engine, DrainWaitsForRunningJobsToFinish) {
  TestSchema schema;
  schema.insert_jobs("gated", 3);
  Gate gate;
  std::atomic<int> started{0};
  Engine engine(schema.config());
  engine.register_handler("gated", [&](const Job&, std::stop_token stop) {
    ++started;
    gate.wait(stop);
    return JobResult::done();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return started == 3; }, 30s));
  std::thread opener([&] {
    wait_until([&] { return engine.busy_workers() == 3; }, 5s);
    gate.open();
  });
  engine.drain();
  opener.join();
  EXPECT_EQ(schema.count("status = 'done'"), 3);
}

TEST(Engine, DrainReleasesJobsStillRunningAtTheTimeout) {
  TestSchema schema;
  schema.insert_jobs("stuck", 2);
  Config config = schema.config();
  config.shutdown.timeout = 200ms;
  Gate never;
  std::atomic<int> started{0};
  Engine engine(config);
  engine.register_handler("stuck", [&](const Job&, std::stop_token stop) {
    ++started;
    never.wait(stop);  // returns only when the engine asks it to stop
    return JobResult::released();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return started == 2; }, 30s));
  engine.drain();
  EXPECT_EQ(schema.count("status = 'running'"), 0);
  EXPECT_EQ(schema.count("status = 'pending' AND attempts = 0 AND locked_by IS NULL"), 2);
}

TEST(Engine, HurryEndsTheDrainWaitButStillReleases) {
  TestSchema schema;
  schema.insert_jobs("stuck", 1);
  Config config = schema.config();
  config.shutdown.timeout = 60s;
  Gate never;
  std::atomic<bool> started{false};
  Engine engine(config);
  engine.register_handler("stuck", [&](const Job&, std::stop_token stop) {
    started = true;
    never.wait(stop);
    return JobResult::released();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 30s));
  const auto begin = std::chrono::steady_clock::now();
  std::thread hurrier([&] { engine.hurry(); });
  engine.drain();
  hurrier.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 10s);
  EXPECT_EQ(schema.count("status = 'pending' AND attempts = 0"), 1);
}

// Claims the engine has made so far (from its /metrics), -1 when it cannot be read.
double claims_made(const Engine& engine) {
  const testing::HttpResponse response = testing::http_get(engine.http_port(), "/metrics");
  return testing::metric_value(response.body, "pgjobd_claim_duration_seconds_count").value_or(-1);
}

// Polls 10 s apart, so that a claim within seconds has another cause, and /metrics on a free
// port, for claims_made().
Config idle_polling(const TestSchema& schema) {
  Config config = schema.config();
  config.poll.min_interval = 10s;
  config.poll.max_interval = 10s;
  config.metrics.listen = "127.0.0.1:0";
  return config;
}

TEST(Engine, WakeStartsAJobWithoutWaitingForThePollInterval) {
  TestSchema schema;
  Config config = idle_polling(schema);
  config.poll.listen_notify = false;  // only the explicit wake() can explain a fast start
  std::atomic<bool> ran{false};
  Engine engine(config);
  engine.register_handler("now", [&](const Job&, std::stop_token) {
    ran = true;
    return JobResult::done();
  });
  engine.start();
  // Once the start-up claim has returned, the next one is 10 s away but for a wake.
  ASSERT_TRUE(wait_until([&] { return claims_made(engine) >= 1; }, 10s));
  schema.insert_jobs("now", 1);
  engine.wake();
  EXPECT_TRUE(wait_until([&] { return ran.load(); }, 3s));
  engine.drain();
}

TEST(Engine, NotifyWakesAnIdleEngine) {
  TestSchema schema;
  const Config config = idle_polling(schema);
  std::atomic<bool> ran{false};
  Engine engine(config);
  engine.register_handler("now", [&](const Job&, std::stop_token) {
    ran = true;
    return JobResult::done();
  });
  engine.start();
  // The start-up claim, then the one the listener asks for once it listens: from then on
  // only a NOTIFY can explain a start within 3 s.
  ASSERT_TRUE(wait_until([&] { return claims_made(engine) >= 2; }, 10s));
  schema.insert_jobs("now", 1);
  EXPECT_TRUE(wait_until([&] { return ran.load(); }, 3s));
  engine.drain();
}

// Each link of a chain of dependent jobs is claimed once, by id: the completion that ends a
// link names the next (CompletionReport::unblocked), the fetcher claims it by id without a
// walk of the claim index, and the listener ignores the completer's own NOTIFY of it
// (ClaimSignal::ignored_notify_pid). Claimed for that NOTIFY instead, each link cost two
// claims (the NOTIFY's and the trailing one after it), three with the claim by id as well.
TEST(Engine, EachLinkOfAChainIsOneClaim) {
  TestSchema schema;
  const Config config = idle_polling(schema);
  std::mutex mutex;
  std::vector<std::int64_t> ran;
  Engine engine(config);
  engine.register_handler("link", [&](const Job& job, std::stop_token) {
    std::lock_guard lock(mutex);
    ran.push_back(job.id);
    return JobResult::done();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return claims_made(engine) >= 2; }, 10s));
  const double before = claims_made(engine);
  constexpr int kLinks = 50;
  nlohmann::json nodes = nlohmann::json::array();
  for (int i = 0; i < kLinks; ++i) {
    nlohmann::json node = {{"ref", "l" + std::to_string(i)}, {"type", "link"}};
    if (i > 0) node["depends_on"] = {"l" + std::to_string(i - 1)};
    nodes.push_back(node);
  }
  pqxx::connection conn(config.database.url);
  pqxx::work txn(conn);
  txn.exec_params(
      "SELECT * FROM " + quote_identifier(schema.name()) + ".pgjobd_enqueue_workflow($1::jsonb)",
      nodes.dump());
  txn.commit();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kLinks; }, 60s))
      << testing::table_summary(schema);
  const double claims = claims_made(engine) - before;
  engine.drain();
  std::lock_guard lock(mutex);
  ASSERT_EQ(ran.size(), static_cast<std::size_t>(kLinks));
  EXPECT_TRUE(std::is_sorted(ran.begin(), ran.end()));
  // The first link's NOTIFY and trailing claim, then one claim per link after it.
  EXPECT_LE(claims, kLinks + 5) << claims << " claims for " << kLinks << " links";
}

TEST(Engine, StopsAJobWhoseLeaseWasTakenOver) {
  TestSchema schema;
  schema.insert_jobs("long", 1);
  Config config = schema.config();
  config.lease.duration = 1500ms;  // heartbeat every 500 ms
  std::atomic<bool> started{false}, stopped{false};
  Gate never;
  Engine engine(config);
  engine.register_handler("long", [&](const Job&, std::stop_token stop) {
    started = true;
    never.wait(stop);
    stopped = true;
    return JobResult::released();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 30s));
  // Another daemon now owns the job (as after a rescue and a new claim).
  schema.exec("UPDATE {jobs} SET locked_by = 'other-daemon', attempts = 2");
  EXPECT_TRUE(wait_until([&] { return stopped.load(); }, 5s));
  engine.drain();
  // Our late release was fenced off: the new owner's claim is intact.
  EXPECT_EQ(schema.query("SELECT status || ' ' || locked_by || ' ' || attempts FROM {jobs}"),
            "running other-daemon 2");
}

TEST(Engine, StopsAJobWhenHeartbeatsCannotReachTheDatabase) {
  TestSchema schema;
  schema.insert_jobs("long", 1);
  Config config = schema.config();
  config.lease.duration = 1500ms;
  std::atomic<bool> started{false}, stopped{false};
  Gate never;
  Engine engine(config);
  engine.register_handler("long", [&](const Job&, std::stop_token stop) {
    started = true;
    never.wait(stop);
    stopped = true;
    return JobResult::released();
  });
  engine.start();
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 30s));
  // Hold the row lock: the heartbeat UPDATE blocks as if the database were unreachable.
  auto blocker = open_connection(config.database, "test-blocker");
  {
    pqxx::work txn(*blocker);
    txn.exec("SELECT 1 FROM " + pgjobd::quote_identifier(schema.name()) + ".jobs FOR UPDATE");
    const auto begin = std::chrono::steady_clock::now();
    EXPECT_TRUE(wait_until([&] { return stopped.load(); }, 5s));
    EXPECT_GE(std::chrono::steady_clock::now() - begin, 300ms);  // not before the lease ran out
    txn.abort();
  }
  engine.drain();
  EXPECT_EQ(schema.count("status = 'running'"), 0);
}

// The leadership pass runs every lease/3 while the daemon has work, but no more than every
// 5 s once it is idle, so a short lease does not raise the idle cost; the leadership TTL
// (three passes) follows the interval, so it stretches and shrinks with it.
TEST(Engine, LeadershipPassesSlowDownWhileIdleAndSpeedUpWithWork) {
  TestSchema schema;
  Config config = schema.config();
  config.lease.duration = 1500ms;  // a pass every 500 ms while busy: a TTL of 1.5 s
  const auto ttl_seconds = [&] {
    const std::string ttl = schema.query(
        "SELECT coalesce(max(extract(epoch FROM expires_at - now())), -1)::text"
        " FROM " +
        pgjobd::quote_identifier(schema.name()) + ".pgjobd_leader");
    return std::stod(ttl);
  };
  Gate gate;
  std::atomic<bool> started{false};
  Engine engine(config);
  engine.register_handler("long", [&](const Job&, std::stop_token stop) {
    started = true;
    gate.wait(stop);
    return JobResult::done();
  });
  engine.start();
  // Idle: three passes at 5 s.
  EXPECT_TRUE(wait_until([&] { return ttl_seconds() > 10; }, 10s)) << ttl_seconds();
  schema.insert_jobs("long", 1);
  ASSERT_TRUE(wait_until([&] { return started.load(); }, 10s));
  // Busy: back to three passes at 500 ms once the next (idle-spaced) pass has run.
  EXPECT_TRUE(wait_until([&] { return ttl_seconds() <= 1.5; }, 10s)) << ttl_seconds();
  gate.open();
  engine.drain();
}

TEST(Engine, RefusesToStartOnAnUnmigratedSchema) {
  TestSchema schema;
  Config config = schema.config();
  config.database.schema = "never_migrated_" + std::to_string(getpid());
  Engine engine(config);
  engine.register_handler("x", [](const Job&, std::stop_token) { return JobResult::done(); });
  try {
    engine.start();
    FAIL() << "started on an unmigrated schema";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("pgjobd migrate"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pgjobd
