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

Lateness summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) {
    const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(ms.size()))) - 1;
    return ms[std::min(i, ms.size() - 1)];
  };
  return {at(0.5), at(0.99), ms.back(), ms.front()};
}

// run_at of each job, in ns since the epoch (to the microsecond, as PostgreSQL keeps it).
std::map<std::string, std::int64_t> run_at_nanos(TestSchema& schema) {
  std::map<std::string, std::int64_t> out;
  std::istringstream rows(schema.query(
      "SELECT string_agg(id || ' ' || (extract(epoch FROM run_at) * 1000000)::bigint, ' ') "
      "FROM {jobs}"));
  std::string id;
  std::int64_t micros = 0;
  while (rows >> id >> micros) out[id] = micros * 1000;
  return out;
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
  EXPECT_EQ(daemon.wait_for_exit(10s), 0);

  std::vector<double> late_ms;
  for (const auto& [id, run_at] : run_at_nanos(schema)) {
    const std::string stamp = read_text_file(dir.file(id));
    ASSERT_FALSE(stamp.empty()) << "job " << id;
    late_ms.push_back(static_cast<double>(std::stoll(stamp) - run_at) / 1e6);
  }
  ASSERT_EQ(late_ms.size(), static_cast<std::size_t>(kJobs));
  const Lateness late = summarize(late_ms);
  std::cout << "[ metric ] delayed job start after its run_at (" << kJobs
            << " jobs over 10 s, poll every 5 s): p50 " << late.p50 << " ms, p99 " << late.p99
            << " ms, max " << late.max << " ms, min " << late.min << " ms\n";
  RecordProperty("delayed_start_p50_ms", std::to_string(late.p50));
  RecordProperty("delayed_start_p99_ms", std::to_string(late.p99));
  RecordProperty("delayed_start_max_ms", std::to_string(late.max));
  EXPECT_LT(late.p99, 50.0);
  // Never early: the claim takes only jobs whose run_at has come (same clock here).
  EXPECT_GE(late.min, 0.0);
}

TEST(DelayedE2E, ARetryStartsWhenItsBackoffEnds) {
  constexpr int kJobs = 5;
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

  // Their retries are written together or apart; the jitter makes their due times differ,
  // so each after the first is awaited in turn.
  for (int i = 0; i < kJobs; ++i) {
    schema.exec("INSERT INTO {jobs} (type) VALUES ('flaky')");
  }
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 30s))
      << schema.count("status = 'done'") << " done\n"
      << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0);

  EXPECT_EQ(schema.count("attempts = 2"), kJobs);
  std::vector<double> late_ms;
  for (const auto& [id, run_at] : run_at_nanos(schema)) {  // the retry's run_at
    const std::string stamp = read_text_file(dir.file(id));
    ASSERT_FALSE(stamp.empty()) << "job " << id;
    late_ms.push_back(static_cast<double>(std::stoll(stamp) - run_at) / 1e6);
  }
  const Lateness late = summarize(late_ms);
  std::cout << "[ metric ] retry start after its run_at (" << kJobs
            << " retries, backoff 0.75-2.25 s, poll every 5 s): p50 " << late.p50 << " ms, max "
            << late.max << " ms, min " << late.min << " ms\n";
  RecordProperty("retry_start_max_ms", std::to_string(late.max));
  EXPECT_LT(late.max, 50.0);
  EXPECT_GE(late.min, 0.0);
}

}  // namespace
}  // namespace pgjobd::testing
