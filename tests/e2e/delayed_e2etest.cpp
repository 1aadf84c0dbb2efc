// End-to-end: an idle daemon starts delayed jobs and retries at their run_at, not at its
// next poll (poll.max_interval 5 s here).

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

// The handler writes the time it started (ns since the epoch) to <dir>/<job id>, or for a
// job that fails its first attempt, to <dir>/<job id>.<attempt>.
std::string stamp_script(const std::string& dir, const std::string& name) {
  const std::string file = shell_quote(dir) + "/" + name;
  return "date +%s%N > " + file + ".tmp && mv " + file + ".tmp " + file;
}

struct Lateness {
  double p50 = 0, p99 = 0, max = 0, min = 0;
};

// The q-quantile (nearest rank) of ms, not empty.
double quantile(std::vector<double> ms, double q) {
  std::sort(ms.begin(), ms.end());
  const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(ms.size()))) - 1;
  return ms[std::min(i, ms.size() - 1)];
}

Lateness summarize(const std::vector<double>& ms) {
  const auto [min, max] = std::minmax_element(ms.begin(), ms.end());
  return {quantile(ms, 0.5), quantile(ms, 0.99), *max, *min};
}

struct Times {
  std::int64_t run_at = 0;      // ns since the epoch (to the microsecond, as PostgreSQL keeps it)
  std::int64_t started_at = 0;  // the last attempt's claim (the row's started_at)
};

std::map<std::string, Times> job_times(TestSchema& schema) {
  std::map<std::string, Times> out;
  std::istringstream rows(schema.query(
      "SELECT string_agg(id || ' ' || (extract(epoch FROM run_at) * 1000000)::bigint || ' ' || "
      "(extract(epoch FROM started_at) * 1000000)::bigint, ' ') FROM {jobs}"));
  std::string id;
  std::int64_t run_at = 0;
  std::int64_t started_at = 0;
  while (rows >> id >> run_at >> started_at) out[id] = {run_at * 1000, started_at * 1000};
  return out;
}

double ms_between(std::int64_t from_ns, std::int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e6;
}

TEST(DelayedE2E, JobsWithAFutureRunAtStartOnTime) {
  constexpr int kJobs = 100;
  TestSchema schema;
  TempDir dir;
  DaemonYaml yaml(schema.name());
  // Polling every 5 s, never faster: only the wake-up at the due time can explain a start
  // within 50 ms of it.
  yaml.set("poll", "{min_interval: 5s, max_interval: 5s, listen_notify: true}")
      .shell_handler("stamp", stamp_script(dir.path(), "$PGJOBD_JOB_ID"));
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  // Spread over 1..11 s from now, 100 ms apart, in 10 INSERTs whose jobs interleave (job i
  // is due in slot 37·i mod 100), so later INSERTs bring jobs due before the one awaited
  // and others due after it: each INSERT's NOTIFY must move the wait only when earlier.
  const std::string base = schema.query("SELECT (now() + interval '1 second')::text");
  for (int statement = 0; statement < 10; ++statement) {
    std::string values;
    for (int i = statement * 10; i < statement * 10 + 10; ++i) {
      const int slot = (i * 37) % kJobs;
      values += std::string(values.empty() ? "" : ", ") + "('stamp', '" + base +
                "'::timestamptz + " + std::to_string(slot * 100) + " * interval '1 ms')";
    }
    schema.exec("INSERT INTO {jobs} (type, run_at) VALUES " + values);
  }
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 30s))
      << schema.count("status = 'done'") << " done\n"
      << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0) << daemon.log();

  std::vector<double> claimed_ms;  // run_at to the claim (started_at): the daemon's part
  std::vector<double> handler_ms;  // run_at to the handler's first instruction (+ fork, exec)
  for (const auto& [id, times] : job_times(schema)) {
    const std::string stamp = read_text_file(dir.file(id));
    ASSERT_FALSE(stamp.empty()) << "job " << id;
    claimed_ms.push_back(ms_between(times.run_at, times.started_at));
    handler_ms.push_back(ms_between(times.run_at, std::stoll(stamp)));
  }
  ASSERT_EQ(claimed_ms.size(), static_cast<std::size_t>(kJobs));
  const Lateness claimed = summarize(claimed_ms);
  const Lateness handler = summarize(handler_ms);
  std::cout << "[ metric ] delayed jobs (" << kJobs << " over 10 s, poll every 5 s), after run_at: "
            << "claimed p50 " << claimed.p50 << " ms, p99 " << claimed.p99 << " ms, max "
            << claimed.max << " ms; handler started p50 " << handler.p50 << " ms, p99 "
            << handler.p99 << " ms, max " << handler.max << " ms\n";
  RecordProperty("delayed_claim_p99_ms", std::to_string(claimed.p99));
  RecordProperty("delayed_handler_p50_ms", std::to_string(handler.p50));
  RecordProperty("delayed_handler_p99_ms", std::to_string(handler.p99));
  RecordProperty("delayed_handler_max_ms", std::to_string(handler.max));
  // Woken at the due time, not by the 5 s poll: the typical claim within a few ms, and
  // every one far below what a poll would take. The bounds hold on a loaded machine (a
  // parallel build on both cores and the suite's other cases: claimed p50 1.9 ms, p99 22
  // ms, max 116 ms; the handler's /bin/sh fork and exec p99 116 ms), where a p99 of a few
  // ms does not; the percentiles are printed above and kept as test properties.
  EXPECT_LT(claimed.p50, 50.0);
  EXPECT_LT(claimed.max, 500.0);
  EXPECT_LT(handler.p50, 100.0);
  EXPECT_LT(handler.max, 1500.0);
  // Never early: the claim takes only jobs whose run_at has come (same clock here).
  EXPECT_GE(claimed.min, 0.0);
}

TEST(DelayedE2E, ARetryStartsWhenItsBackoffEnds) {
  constexpr int kJobs = 10;
  TestSchema schema;
  TempDir dir;
  DaemonYaml yaml(schema.name());
  yaml.set("poll", "{min_interval: 5s, max_interval: 5s, listen_notify: true}")
      .set("retry", "{base: 1500ms, max_delay: 10s, jitter: 0.5}")
      // Fails its first attempt; the second writes its start time.
      .shell_handler("flaky", "if [ \"$PGJOBD_JOB_ATTEMPT\" = 1 ]; then exit 1; fi; " +
                                  stamp_script(dir.path(), "$PGJOBD_JOB_ID"));
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();

  // Their retries are written together or apart: the shortest of a written batch is
  // awaited from the completer's word, the others from what the store says is due next.
  for (int i = 0; i < kJobs; ++i) {
    schema.exec("INSERT INTO {jobs} (type) VALUES ('flaky')");
  }
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 30s))
      << schema.count("status = 'done'") << " done\n"
      << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0) << daemon.log();

  EXPECT_EQ(schema.count("attempts = 2"), kJobs);
  std::vector<double> claimed_ms;
  std::vector<double> handler_ms;
  std::ostringstream each;  // every job's numbers, for a failure's message
  for (const auto& [id, times] : job_times(schema)) {  // the retry's run_at and claim
    const std::string stamp = read_text_file(dir.file(id));
    ASSERT_FALSE(stamp.empty()) << "job " << id;
    claimed_ms.push_back(ms_between(times.run_at, times.started_at));
    handler_ms.push_back(ms_between(times.run_at, std::stoll(stamp)));
    each << "job " << id << ": claimed " << claimed_ms.back() << " ms, handler "
         << handler_ms.back() << " ms after run_at\n";
  }
  const Lateness claimed = summarize(claimed_ms);
  const Lateness handler = summarize(handler_ms);
  std::cout << "[ metric ] retries (" << kJobs
            << ", backoff 0.75-2.25 s, poll every 5 s), after run_at: claimed p50 " << claimed.p50
            << " ms, max " << claimed.max << " ms; handler started p50 " << handler.p50
            << " ms, max " << handler.max << " ms\n";
  RecordProperty("retry_claim_max_ms", std::to_string(claimed.max));
  RecordProperty("retry_handler_max_ms", std::to_string(handler.max));
  // Every claim at its time: a retry left to the poll waits for it (2.5 s on average), as
  // one in ten runs did while the question after a claim looked past a job that came due
  // on the way (see Fetcher::learn_next_due). The typical claim within a few ms; the
  // slowest within 0.5 s, which a loaded machine stays under (claims seen 116 ms late
  // with a parallel build on both cores) and a retry left to the 5 s poll exceeds nine
  // times in ten. The handler's start adds a fork and exec, which a loaded machine can
  // stall (CI's ASan stage has seen 0.3 s).
  EXPECT_LT(claimed.p50, 50.0) << each.str();
  EXPECT_LT(claimed.max, 500.0) << each.str();
  EXPECT_LT(handler.p50, 100.0) << each.str();
  EXPECT_LT(handler.max, 1500.0) << each.str();
  EXPECT_GE(claimed.min, 0.0) << each.str();
}

}  // namespace
}  // namespace pgjobd::testing
