// End-to-end: concurrency and rate limits across daemons (issue 13, README "Limits").
// Every handler here is a /bin/sh script that appends a "start" line before its work and an
// "end" line after it, each a short append (O_APPEND, one write: atomic), with its own
// `date +%s%N`. A child records its start after its claim and its end before the daemon
// frees the slot, so the children's intervals lie inside the slots' intervals: the overlap
// they show is a lower bound of the real slot use, and a limit that is exceeded shows.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "db/sql_text.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kNsPerSecond = 1'000'000'000;

// The clock of `date +%s%N` in the handlers.
std::int64_t epoch_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) / kNsPerSecond; }

// A script that records its run around `body` in `file`: lines
// "start|end <epoch ns> <job id> <attempt> <tag> <shell pid>". `tag` is shell text: "$0" is
// the name given after the script (see named_exec), "$u" a variable that `body_prefix` set.
std::string recorded(const std::string& file, const std::string& body,
                     const std::string& tag = "$0", const std::string& body_prefix = "") {
  const std::string f = shell_quote(file);
  const std::string fields = " $PGJOBD_JOB_ID $PGJOBD_JOB_ATTEMPT " + tag + " $$";
  return body_prefix + "echo \"start $(date +%s%N)" + fields + "\" >> " + f + "; " + body +
         "; echo \"end $(date +%s%N)" + fields + "\" >> " + f;
}

// handlers.<type> value: `sh -c SCRIPT NAME`, so $0 is NAME in the script.
std::string named_exec(const std::string& script, const std::string& name) {
  return "{exec: [/bin/sh, -c, " + yaml_quote(script) + ", " + name + "]}";
}

// The payload's "user" (the job's payload is the handler's stdin), "-" when there is none.
const std::string kReadUser = "u=$(sed -n 's/.*\"user\": *\"\\([^\"]*\\)\".*/\\1/p'); u=${u:--}; ";

struct HandlerRun {
  std::int64_t id = 0;
  int attempt = 0;
  std::string tag;
  long pid = 0;
  std::int64_t start = 0;  // epoch ns; 0 when there is no start line
  std::int64_t end = 0;    // epoch ns; 0 when there is no end line (yet)
};

// The runs recorded in `path`, one per (job id, attempt), by start.
std::vector<HandlerRun> read_runs(const std::string& path) {
  std::map<std::pair<std::int64_t, int>, HandlerRun> by_attempt;
  for (const std::string& line : read_lines(path)) {
    std::istringstream words(line);
    std::string kind;
    HandlerRun fields;
    std::int64_t ns = 0;
    if (!(words >> kind >> ns >> fields.id >> fields.attempt >> fields.tag >> fields.pid)) {
      ADD_FAILURE() << "unreadable line in " << path << ": " << line;
      continue;
    }
    HandlerRun& run = by_attempt[{fields.id, fields.attempt}];
    run.id = fields.id;
    run.attempt = fields.attempt;
    run.tag = fields.tag;
    run.pid = fields.pid;
    if (kind == "start") {
      EXPECT_EQ(run.start, 0) << "two starts of job " << run.id << " attempt " << run.attempt;
      run.start = ns;
    } else {
      EXPECT_EQ(run.end, 0) << "two ends of job " << run.id << " attempt " << run.attempt;
      run.end = ns;
    }
  }
  std::vector<HandlerRun> runs;
  for (auto& [key, run] : by_attempt) runs.push_back(run);
  std::sort(runs.begin(), runs.end(),
            [](const HandlerRun& a, const HandlerRun& b) { return a.start < b.start; });
  return runs;
}

std::vector<HandlerRun> with_tag(const std::vector<HandlerRun>& runs, const std::string& tag) {
  std::vector<HandlerRun> out;
  for (const HandlerRun& run : runs) {
    if (run.tag == tag) out.push_back(run);
  }
  return out;
}

std::size_t count_starts(const std::string& path) {
  std::size_t n = 0;
  for (const std::string& line : read_lines(path)) n += line.rfind("start ", 0) == 0 ? 1 : 0;
  return n;
}

// The most runs in progress at one time. A run without an end line counts as running until
// `open_until`. At equal times an end comes before a start (a slot freed, then taken).
int max_overlap(const std::vector<HandlerRun>& runs,
                std::int64_t open_until = std::numeric_limits<std::int64_t>::max()) {
  std::vector<std::pair<std::int64_t, int>> events;
  for (const HandlerRun& run : runs) {
    events.emplace_back(run.start, +1);
    events.emplace_back(run.end != 0 ? run.end : open_until, -1);
  }
  std::sort(events.begin(), events.end());
  int now = 0;
  int most = 0;
  for (const auto& [time, delta] : events) {
    now += delta;
    most = std::max(most, now);
  }
  return most;
}

// The window [t_i, t_j] of sorted times with the most events above burst + rate × width.
struct Window {
  double excess = 0;
  std::size_t count = 0;
  double width = 0;
  std::string describe() const {
    std::ostringstream text;
    text << count << " in " << width << " s, " << excess << " above burst + rate × w";
    return text.str();
  }
};

Window worst_window(const std::vector<double>& times, double rate, double burst) {
  Window worst;
  worst.excess = -burst;
  for (std::size_t i = 0; i < times.size(); ++i) {
    for (std::size_t j = i; j < times.size(); ++j) {
      const double width = times[j] - times[i];
      const double excess = static_cast<double>(j - i + 1) - (burst + rate * width);
      if (excess > worst.excess) worst = {excess, j - i + 1, width};
    }
  }
  return worst;
}

// The claims of the jobs matching `where` as the table holds them, in epoch ns by (job id,
// attempt): started_at for the current attempt, attempt_log for the earlier ones. Each is
// its claim's transaction time, taken a few milliseconds before the claim reads the bucket.
std::map<std::pair<std::int64_t, int>, std::int64_t> claims_of(TestSchema& schema,
                                                               const std::string& where) {
  std::istringstream rows(schema.query(
      "SELECT string_agg(id || ' ' || attempt || ' ' || "
      "(extract(epoch FROM t) * 1000000)::bigint, ' ') FROM ("
      "SELECT id, attempts AS attempt, started_at AS t FROM {jobs} WHERE " +
      where +
      " UNION SELECT j.id, (a.value ->> 'attempt')::int, (a.value ->> 'started_at')::timestamptz "
      "FROM {jobs} j, jsonb_array_elements(j.attempt_log) a WHERE " +
      where + ") s"));
  std::map<std::pair<std::int64_t, int>, std::int64_t> claims;
  std::int64_t id = 0;
  int attempt = 0;
  std::int64_t us = 0;
  while (rows >> id >> attempt >> us) claims[{id, attempt}] = us * 1000;
  return claims;
}

// Checks `runs` (one limit's, all of them) against `rate` and `burst` twice.
// - Their claims, exactly: in every window, at most burst + rate × w, plus one token for the
//   few milliseconds between a claim's transaction time and its read of the bucket.
// - The children's starts: each starts after its claim by its spawn time (fork and exec,
//   10-400 ms on a loaded machine, the first of a burst spawned one after another), so a
//   window of starts holds claims from a window longer by the spread of those delays: the
//   starts may exceed the bucket by the claims' excess plus rate × that spread, no more.
// Returns the span of the starts, for the caller's checks of pace.
double check_rate(TestSchema& schema, const std::string& where, const std::vector<HandlerRun>& runs,
                  double rate, double burst, const std::string& label) {
  const auto claims = claims_of(schema, where);
  EXPECT_EQ(claims.size(), runs.size()) << "one claim per run";
  std::vector<double> claim_times;
  for (const auto& [key, ns] : claims) claim_times.push_back(seconds(ns - runs.front().start));
  std::sort(claim_times.begin(), claim_times.end());
  std::vector<double> starts;
  double spawn_min = std::numeric_limits<double>::max();
  double spawn_max = 0;
  for (const HandlerRun& run : runs) {
    starts.push_back(seconds(run.start - runs.front().start));
    const auto claim = claims.find({run.id, run.attempt});
    if (claim == claims.end()) {
      ADD_FAILURE() << "job " << run.id << " attempt " << run.attempt << " ran unclaimed";
      continue;
    }
    const double spawn = seconds(run.start - claim->second);
    EXPECT_GE(spawn, 0.0) << "job " << run.id << " started before its claim";
    spawn_min = std::min(spawn_min, spawn);
    spawn_max = std::max(spawn_max, spawn);
  }
  const Window worst_claims = worst_window(claim_times, rate, burst);
  const Window worst = worst_window(starts, rate, burst);
  const double spread = spawn_max - spawn_min;
  std::printf(
      "[ limits ] %s: %zu starts over %.2f s; worst window of the claims: %s; of the "
      "children's starts: %s; spawn delays %.3f-%.3f s\n",
      label.c_str(), starts.size(), starts.back(), worst_claims.describe().c_str(),
      worst.describe().c_str(), spawn_min, spawn_max);
  EXPECT_LE(worst_claims.excess, 1.0) << "claims exceed the bucket: " << worst_claims.describe();
  EXPECT_LE(worst.excess, std::max(worst_claims.excess, 0.0) + rate * spread + 1e-6)
      << "children's starts exceed the bucket beyond their spawn delays' spread of " << spread
      << " s: " << worst.describe();
  return starts.back();
}

// Samples how many jobs matching `where` the table shows running, keeping the maximum.
// The most jobs found running at once in the table, less those whose handlers had
// returned by then (`runs_file`'s end lines): a job's row stays running until its
// completion is written, and under one limit the daemon that ran it no longer counts it
// (README "Limits"). The end lines are read after the table, and a handler writes its end
// line before its daemon lets the job go, so a job found running and without an end line
// was in a daemon's hands at the table's read: what a limit bounds.
class RunningSampler {
 public:
  RunningSampler(TestSchema& schema, std::string where, std::string runs_file)
      : schema_(schema),
        where_("status = 'running' AND (" + std::move(where) + ")"),
        runs_file_(std::move(runs_file)) {}
  std::int64_t sample() {
    const std::string rows = schema_.query(
        "SELECT coalesce(string_agg(id || ' ' || attempts, ' '), '') FROM {jobs} WHERE " + where_);
    std::set<std::pair<std::int64_t, int>> returned;
    for (const HandlerRun& run : read_runs(runs_file_)) {
      if (run.end != 0) returned.insert({run.id, run.attempt});
    }
    std::istringstream words(rows);
    std::int64_t id = 0;
    int attempt = 0;
    std::int64_t n = 0;
    while (words >> id >> attempt) n += returned.contains({id, attempt}) ? 0 : 1;
    most_ = std::max(most_, n);
    ++samples_;
    return n;
  }
  std::int64_t most() const { return most_; }
  int samples() const { return samples_; }

 private:
  TestSchema& schema_;
  std::string where_;
  std::string runs_file_;
  std::int64_t most_ = 0;
  int samples_ = 0;
};

// SIGTERM to every daemon at once, then each must drain and exit 0.
void stop_all(std::initializer_list<std::reference_wrapper<DaemonProcess>> daemons) {
  for (DaemonProcess& daemon : daemons) daemon.signal(SIGTERM);
  for (DaemonProcess& daemon : daemons) EXPECT_EQ(daemon.wait_for_exit(20s), 0) << daemon.log();
}

void stop_all(std::vector<std::unique_ptr<DaemonProcess>>& daemons) {
  for (auto& daemon : daemons) daemon->signal(SIGTERM);
  for (auto& daemon : daemons) EXPECT_EQ(daemon->wait_for_exit(20s), 0) << daemon->log();
}

// pgjobd_limit_throttled_total{limit, reason} of the daemon serving /metrics on `port`.
double throttled_claims(int port, const std::string& limit, const std::string& reason) {
  const HttpResponse metrics = http_get(port, "/metrics");
  EXPECT_EQ(metrics.status, 200) << metrics.error;
  return metric_value(metrics.body, "pgjobd_limit_throttled_total",
                      {{"limit", limit}, {"reason", reason}})
      .value_or(0);
}

const char* const kPartnerLimit = "{partner_api: {types: [call_partner], concurrency: 3}}";

// 60 jobs of 0.5 s under `concurrency: 3` on three daemons of 8 workers each: never more than
// 3 at once (a per-daemon limit would allow 9), 3 at once at some point (the limit is used,
// not just respected), and so 60 × 0.5 s / 3 = 10 s in all.
TEST(LimitsE2E, ConcurrencyLimitIsExactAcrossThreeDaemons) {
  constexpr int kJobs = 60;
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string script = recorded(runs_file, "sleep 0.5");
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (const std::string name : {"d1", "d2", "d3"}) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 8}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("limits", kPartnerLimit)
        .set("metrics", "{listen: \"127.0.0.1:0\"}")
        .handler("call_partner", named_exec(script, name));
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
  }
  for (auto& daemon : daemons) ASSERT_TRUE(daemon->wait_ready()) << daemon->log();
  std::vector<int> ports;
  for (auto& daemon : daemons) ports.push_back(daemon->metrics_port());
  for (const int port : ports) ASSERT_GT(port, 0);

  RunningSampler running(schema, "type = 'call_partner'", runs_file);
  const auto started = Clock::now();
  schema.insert_jobs("call_partner", kJobs);
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return schema.count("status = 'done'") == kJobs;
      },
      60s))
      << table_summary(schema) << "; most running at once: " << running.most();
  const double wall = seconds_since(started);

  const std::vector<HandlerRun> runs = read_runs(runs_file);
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kJobs));
  for (const HandlerRun& run : runs)
    EXPECT_NE(run.end, 0) << "job " << run.id << " has no end line";
  const int overlap = max_overlap(runs);
  std::map<std::string, int> per_daemon;
  for (const HandlerRun& run : runs) ++per_daemon[run.tag];
  std::printf(
      "[ limits ] concurrency 3, 3 daemons × 8 workers: %d jobs of 0.5 s in %.2f s, max overlap "
      "%d (children's timestamps), max running %lld (%d table samples); by d1/d2/d3: %d/%d/%d\n",
      kJobs, wall, overlap, static_cast<long long>(running.most()), running.samples(),
      per_daemon["d1"], per_daemon["d2"], per_daemon["d3"]);
  RecordProperty("concurrency_wall_ms", std::to_string(static_cast<int>(wall * 1000)));
  // One daemon may run most jobs, or all: it claims again as soon as its job's handler
  // returns, before its completion is written, which the others wait for. Each other one
  // was held back by the shared limit: it tried, with 8 free workers, and found 3 running.
  // (One that holds the limit alone asks for no more than its room: README "Limits".)
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const double held_back = throttled_claims(ports[i], "partner_api", "concurrency");
    const int ran = per_daemon["d" + std::to_string(i + 1)];
    std::printf("[ limits ] d%zu: %.0f claims held back by partner_api\n", i + 1, held_back);
    if (ran < kJobs) {
      EXPECT_GT(held_back, 0) << "d" << i + 1 << " ran " << ran;
    }
  }
  EXPECT_LE(overlap, 3) << "the limit was exceeded";
  EXPECT_GE(overlap, 3) << "the limit was never reached";
  EXPECT_LE(running.most(), 3) << "the table showed more than 3 running";
  EXPECT_GE(wall, 9.0) << "60 runs of 0.5 s, 3 at a time, take at least 10 s";
  EXPECT_LE(wall, 20.0) << "slots stay unused for long";
  EXPECT_EQ(schema.count("attempts <> 1"), 0) << "a limited claim should not cost an attempt";
  stop_all(daemons);
}

// 50 starts under `rate: 10/s, burst: 10` on three daemons keep to the bucket in every
// window (check_rate): the first 10 at once (a full bucket), the other 40 at 10/s, about 4 s.
TEST(LimitsE2E, RateLimitNeverExceedsBurstPlusRateInAnyWindow) {
  constexpr int kJobs = 50;
  constexpr double kRate = 10.0;
  constexpr double kBurst = 10.0;
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string script = recorded(runs_file, "true");
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (const std::string name : {"d1", "d2", "d3"}) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 8}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("limits", "{mail: {types: [send_email], rate: 10/s, burst: 10}}")
        .set("metrics", "{listen: \"127.0.0.1:0\"}")
        .handler("send_email", named_exec(script, name));
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
  }
  for (auto& daemon : daemons) ASSERT_TRUE(daemon->wait_ready()) << daemon->log();
  std::vector<int> ports;
  for (auto& daemon : daemons) ports.push_back(daemon->metrics_port());
  for (const int port : ports) ASSERT_GT(port, 0);
  // The limit's series is there at 0 before its first throttled claim (README "Metrics").
  EXPECT_EQ(metric_value(http_get(ports[0], "/metrics").body, "pgjobd_limit_throttled_total",
                         {{"limit", "mail"}, {"reason", "rate"}}),
            0.0);

  const auto started = Clock::now();
  schema.insert_jobs("send_email", kJobs);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == kJobs; }, 40s))
      << table_summary(schema) << "; starts so far: " << count_starts(runs_file);
  const double wall = seconds_since(started);

  const std::vector<HandlerRun> runs = read_runs(runs_file);
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kJobs));
  const double span =
      check_rate(schema, "true", runs, kRate, kBurst, "rate 10/s burst 10, 3 daemons");
  std::printf("[ limits ] wall %.2f s\n", wall);
  EXPECT_GE(span, 3.5) << "40 starts beyond the burst at 10/s take 4 s";
  EXPECT_LE(span, 8.0) << "tokens stay unused for long";
  EXPECT_EQ(schema.count("attempts <> 1"), 0) << "a throttled claim should not cost an attempt";
  // Not claimed hot in a loop: a daemon held back by the rate waits for the next token
  // (100 ms here) or a freed worker, not for its 10 ms minimum poll interval. 50 held-back
  // claims per second and daemon is half what a 10 ms loop would make (and far below a
  // loop without any wait).
  double throttled = 0;
  for (const int port : ports) throttled += throttled_claims(port, "mail", "rate");
  std::printf("[ limits ] rate: %.0f throttled claims in all 3 daemons over %.2f s (%.1f/s each)\n",
              throttled, wall, throttled / wall / 3);
  EXPECT_GT(throttled, 0) << "pgjobd_limit_throttled_total{limit=mail,reason=rate}";
  EXPECT_LE(throttled / wall / 3, 50.0) << "throttled claims per second and daemon";
  stop_all(daemons);
}

// A limit by queue (`queues: [mail]`, rate 10/s, burst 1) counts every start, retries as
// much as first attempts (README "Limits"): 15 jobs in queue mail that fail once each make
// 30 starts that keep to the bucket in every window (check_rate), so about 3 s; 8 jobs of the same
// type in queue default are not limited and start at once.
TEST(LimitsE2E, RateLimitByQueueCountsRetries) {
  constexpr double kRate = 10.0;
  constexpr double kBurst = 1.0;
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string script =
      recorded(runs_file,
               "rc=0; if [ \"$PGJOBD_JOB_QUEUE\" = mail ] && [ $PGJOBD_JOB_ATTEMPT = 1 ]; "
               "then rc=1; fi",
               "$PGJOBD_JOB_QUEUE");
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (const std::string name : {"d1", "d2"}) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 8, queues: {default: {}, mail: {}}}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("limits", "{outbox: {queues: [mail], rate: 10/s, burst: 1}}")
        .handler("send_sms",
                 "{exec: [/bin/sh, -c, " + yaml_quote(script + "; exit $rc") + ", " + name + "]}");
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
  }
  for (auto& daemon : daemons) ASSERT_TRUE(daemon->wait_ready()) << daemon->log();
  schema.insert_jobs("send_sms", 15, "mail");
  schema.insert_jobs("send_sms", 8, "default");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 23; }, 30s))
      << table_summary(schema);
  EXPECT_EQ(schema.count("queue = 'mail' AND attempts = 2"), 15);
  EXPECT_EQ(schema.count("queue = 'default' AND attempts = 1"), 8);

  const std::vector<HandlerRun> runs = read_runs(runs_file);
  const std::vector<HandlerRun> mail = with_tag(runs, "mail");
  const std::vector<HandlerRun> other = with_tag(runs, "default");
  ASSERT_EQ(mail.size(), 30u);
  ASSERT_EQ(other.size(), 8u);
  const double span = check_rate(schema, "queue = 'mail'", mail, kRate, kBurst,
                                 "rate by queue with retries (15 first, 15 retries)");
  const double other_span = seconds(other.back().start - other.front().start);
  std::printf("[ limits ] 8 unlimited starts over %.3f s\n", other_span);
  EXPECT_GE(span, 2.5) << "29 starts beyond a burst of 1 at 10/s take 2.9 s";
  EXPECT_LE(span, 6.0);
  EXPECT_LT(other_span, 1.0) << "queue default is not limited";
  stop_all(daemons);
}

// `key: user, concurrency: 1` with 5 users × 10 jobs of 0.2 s, inserted user by user: never
// two runs of one user at once, and the users take turns: each starts its first job within
// about a second, before any user has finished all of its jobs.
TEST(LimitsE2E, KeyedLimitRunsOneJobPerUserAndAllUsersProgress) {
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string script = recorded(runs_file, "sleep 0.2", "$u", kReadUser);
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (const std::string name : {"d1", "d2"}) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 8}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("limits", "{per_user: {types: [sync_user], key: user, concurrency: 1}}")
        .handler("sync_user", named_exec(script, name));
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
  }
  for (auto& daemon : daemons) ASSERT_TRUE(daemon->wait_ready()) << daemon->log();

  const auto started = Clock::now();
  schema.exec(
      "INSERT INTO {jobs} (type, payload) SELECT 'sync_user', jsonb_build_object('user', 'u' || "
      "u, 'n', n) FROM generate_series(1, 5) u, generate_series(1, 10) n ORDER BY u, n");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 50; }, 40s))
      << table_summary(schema);
  const double wall = seconds_since(started);

  const std::vector<HandlerRun> runs = read_runs(runs_file);
  ASSERT_EQ(runs.size(), 50u);
  const std::int64_t t0 = runs.front().start;
  std::int64_t first_finisher = std::numeric_limits<std::int64_t>::max();
  std::map<std::string, std::vector<HandlerRun>> per_user;
  for (const std::string user : {"u1", "u2", "u3", "u4", "u5"}) {
    per_user[user] = with_tag(runs, user);
    ASSERT_EQ(per_user[user].size(), 10u) << user;
    std::int64_t last_end = 0;
    for (const HandlerRun& run : per_user[user]) last_end = std::max(last_end, run.end);
    first_finisher = std::min(first_finisher, last_end);
  }
  std::ostringstream firsts;
  for (auto& [user, user_runs] : per_user) {
    const double first = seconds(user_runs.front().start - t0);
    firsts << " " << user << "=" << static_cast<int>(first * 1000) << "ms";
    EXPECT_EQ(max_overlap(user_runs), 1) << user << " ran two jobs at once";
    EXPECT_LE(first, 1.0) << user << " waited for its first run";
    EXPECT_LT(user_runs.front().start, first_finisher)
        << user << " started only after another user had finished all of its jobs";
  }
  const int overlap = max_overlap(runs);
  std::printf(
      "[ limits ] keyed concurrency 1, 5 users × 10 jobs of 0.2 s: done in %.2f s, max overlap "
      "%d; first start per user:%s; first user done after %.2f s\n",
      wall, overlap, firsts.str().c_str(), seconds(first_finisher - t0));
  EXPECT_EQ(overlap, 5) << "the five users should run side by side";
  EXPECT_LE(wall, 15.0) << "one user at a time takes 10 s; side by side about 2-4 s";
  stop_all(daemons);
}

// A job in two limits takes a slot in both: call_partner at most 3 at once, and at most one
// per user; 4 users × 5 jobs plus 4 jobs without a "user" field (one shared partition of
// their own, README "Limits") on two daemons.
TEST(LimitsE2E, JobInTwoLimitsSatisfiesBoth) {
  constexpr int kJobs = 24;
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string script = recorded(runs_file, "sleep 0.3", "$u", kReadUser);
  std::vector<std::unique_ptr<DaemonProcess>> daemons;
  for (const std::string name : {"d1", "d2"}) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 8}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("limits",
             "{partner_api: {types: [call_partner], concurrency: 3}, per_user: {types: "
             "[call_partner], key: user, concurrency: 1}}")
        .handler("call_partner", named_exec(script, name));
    daemons.push_back(std::make_unique<DaemonProcess>(yaml.text()));
  }
  for (auto& daemon : daemons) ASSERT_TRUE(daemon->wait_ready()) << daemon->log();

  RunningSampler running(schema, "type = 'call_partner'", runs_file);
  schema.exec(
      "INSERT INTO {jobs} (type, payload) SELECT 'call_partner', jsonb_build_object('user', 'u' "
      "|| u, 'n', n) FROM generate_series(1, 4) u, generate_series(1, 5) n ORDER BY u, n");
  schema.exec(
      "INSERT INTO {jobs} (type, payload) SELECT 'call_partner', jsonb_build_object('n', n) "
      "FROM generate_series(1, 4) n");
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return schema.count("status = 'done'") == kJobs;
      },
      30s))
      << table_summary(schema);

  const std::vector<HandlerRun> runs = read_runs(runs_file);
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kJobs));
  std::ostringstream per_user;
  for (const std::string user : {"u1", "u2", "u3", "u4", "-"}) {
    const std::vector<HandlerRun> mine = with_tag(runs, user);
    EXPECT_EQ(mine.size(), user == "-" ? 4u : 5u) << user;
    per_user << " " << user << "=" << max_overlap(mine);
    EXPECT_EQ(max_overlap(mine), 1) << "partition " << user << " ran two jobs at once";
  }
  std::printf("[ limits ] two limits: max overlap %d, max running %lld; per user:%s\n",
              max_overlap(runs), static_cast<long long>(running.most()), per_user.str().c_str());
  EXPECT_EQ(max_overlap(runs), 3);
  EXPECT_LE(running.most(), 3);
  stop_all(daemons);
}

// 1,000 due jobs of user "a" (concurrency 1: one runs, 999 wait) are older than a job of
// user "b" and a job of an unlimited type: neither waits behind a's jobs.
TEST(LimitsE2E, SaturatedPartitionDoesNotBlockOtherJobs) {
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 4}")
      .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
      .set("limits", "{per_user: {types: [sync_user], key: user, concurrency: 1}}")
      .handler("sync_user", named_exec(recorded(runs_file, "sleep 1", "$u", kReadUser), "d1"))
      .handler("report", named_exec(recorded(runs_file, "true", "other"), "d1"));
  schema.exec(
      "INSERT INTO {jobs} (type, payload) SELECT 'sync_user', jsonb_build_object('user', 'a', "
      "'n', n) FROM generate_series(1, 1000) n");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until([&] { return count_starts(runs_file) >= 1; }, 15s))
      << table_summary(schema);

  // `pgjobd stats` shows the limit and its use: a's job running, one busy partition.
  std::string stats_line;
  EXPECT_TRUE(wait_until(
      [&] {
        const CliResult stats = run_cli({"stats", "-c", daemon.config_path()});
        std::istringstream lines(stats.out);
        for (std::string line; std::getline(lines, line);) {
          std::istringstream words(line);
          std::string name;
          long long running = -1;
          long long partitions = -1;
          if (words >> name >> running >> partitions && name == "per_user") {
            stats_line = line;
            return running == 1 && partitions == 1;
          }
        }
        stats_line = stats.out + stats.err;
        return false;
      },
      10s))
      << stats_line;
  std::printf("[ limits ] pgjobd stats: %s\n", stats_line.c_str());

  const std::int64_t inserted = epoch_ns();
  schema.exec(
      "INSERT INTO {jobs} (type, payload) VALUES ('sync_user', '{\"user\": \"b\"}'), "
      "('report', '{}')");
  const auto started = [&](const std::string& tag) {
    return !with_tag(read_runs(runs_file), tag).empty();
  };
  EXPECT_TRUE(wait_until([&] { return started("b") && started("other"); }, 15s))
      << table_summary(schema);
  const std::vector<HandlerRun> runs = read_runs(runs_file);
  const std::vector<HandlerRun> b = with_tag(runs, "b");
  const std::vector<HandlerRun> other = with_tag(runs, "other");
  const std::vector<HandlerRun> a = with_tag(runs, "a");
  ASSERT_EQ(b.size(), 1u);
  ASSERT_EQ(other.size(), 1u);
  const double b_wait = seconds(b.front().start - inserted);
  const double other_wait = seconds(other.front().start - inserted);
  std::printf(
      "[ limits ] head of line: behind 1000 jobs of a saturated user, b's job started after "
      "%.3f s, the unlimited type's after %.3f s (%zu of a's jobs started meanwhile)\n",
      b_wait, other_wait, a.size());
  EXPECT_LT(b_wait, 2.0);
  EXPECT_LT(other_wait, 2.0);
  EXPECT_EQ(max_overlap(a, epoch_ns()), 1) << "user a ran two jobs at once";
  EXPECT_LE(schema.count("status = 'running' AND payload->>'user' = 'a'"), 1);
  stop_daemon(daemon);
}

// SIGKILL of the daemon holding all 3 places: its handlers sleep 30 s (as daemon A), the
// others' 0.5 s. After the kill the places come back with the rescue of A's leases (2 s,
// then a rescue pass), B and C run the limited jobs at the full limit again, and never above it:
// neither in the table (sampled throughout) nor in the children's timestamps.
// A SIGKILLed daemon's handlers outlive it (they are process groups of their own); the test
// kills them at once, as a service manager stopping the daemon's cgroup would.
TEST(LimitsE2E, SlotsOfAKilledDaemonReturnWithTheRescueAndTheLimitHolds) {
  constexpr int kJobs = 12;
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string script =
      recorded(runs_file, "if [ \"$0\" = A ]; then sleep 30; else sleep 0.5; fi");
  const auto config_for = [&](const std::string& name) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 8}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("lease", "{duration: 2s}")
        .set("limits", kPartnerLimit)
        .handler("call_partner", named_exec(script, name));
    return yaml.text();
  };
  RunningSampler running(schema, "type = 'call_partner'", runs_file);
  schema.insert_jobs("call_partner", kJobs);

  DaemonProcess a(config_for("A"));
  ASSERT_TRUE(a.wait_ready()) << a.log();
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return running.sample() >= 3 && count_starts(runs_file) >= 3;
      },
      15s))
      << table_summary(schema);
  EXPECT_EQ(running.sample(), 3) << "A alone ran more than the limit";
  const std::string a_id = schema.query("SELECT min(locked_by) FROM {jobs}");
  ASSERT_EQ(schema.query("SELECT count(DISTINCT locked_by) FROM {jobs}"), "1");

  DaemonProcess b(config_for("B"));
  DaemonProcess c(config_for("C"));
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return b.log().find("pgjobd ready") != std::string::npos &&
               c.log().find("pgjobd ready") != std::string::npos;
      },
      15s))
      << b.log() << c.log();
  EXPECT_EQ(running.sample(), 3);
  EXPECT_EQ(count_starts(runs_file), 3u) << "B or C ran a job while A held all the slots";

  a.signal(SIGKILL);
  const auto killed_at = Clock::now();
  ASSERT_EQ(a.wait_for_exit(5s), 128 + SIGKILL);
  const std::vector<HandlerRun> a_runs = with_tag(read_runs(runs_file), "A");
  for (const HandlerRun& run : a_runs) ::kill(-static_cast<pid_t>(run.pid), SIGKILL);
  ASSERT_EQ(a_runs.size(), 3u);
  ASSERT_TRUE(wait_until(
      [&] {
        for (const HandlerRun& run : a_runs) {
          if (process_alive(static_cast<pid_t>(run.pid))) return false;
        }
        return true;
      },
      5s));
  const std::int64_t a_children_dead = epoch_ns();

  const std::string by_others = "type = 'call_partner' AND locked_by <> '" + a_id + "'";
  RunningSampler running_elsewhere(schema, by_others, runs_file);
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return running_elsewhere.sample() == 3;
      },
      20s))
      << table_summary(schema) << "; most running on B and C at once: " << running_elsewhere.most();
  const double recovery = seconds_since(killed_at);
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return schema.count("status = 'done'") == kJobs;
      },
      30s))
      << table_summary(schema);
  const double all_done = seconds_since(killed_at);

  const std::vector<HandlerRun> runs = read_runs(runs_file);
  const int overlap = max_overlap(runs, a_children_dead);
  std::printf(
      "[ limits ] SIGKILL of the slot holder (lease 2s): B and C at the full limit %.2f s after "
      "the kill, all %d done after %.2f s; max running %lld (%d samples), max overlap %d\n",
      recovery, kJobs, all_done, static_cast<long long>(running.most()), running.samples(),
      overlap);
  // The daemons held back by the limit are not idle: they rescue every third of a lease,
  // not every 5 s (which took 5.8 s here).
  EXPECT_LT(recovery, 4.0) << "one lease (2 s) + a rescue interval (0.67 s) + a claim";
  EXPECT_LE(running.most(), 3);
  EXPECT_LE(overlap, 3);
  EXPECT_EQ(runs.size(), static_cast<std::size_t>(kJobs + 3));
  std::set<std::int64_t> a_jobs;
  for (const HandlerRun& run : a_runs) a_jobs.insert(run.id);
  for (const HandlerRun& run : runs) {
    if (run.tag == "A") continue;
    EXPECT_EQ(run.attempt, a_jobs.contains(run.id) ? 2 : 1) << "job " << run.id;
  }
  stop_all({b, c});
}

// A stale owner holds nothing: A runs J1 under `concurrency: 1` and freezes (SIGSTOP); after
// its lease (2 s) B runs J1 again (attempt 2); J2 is inserted then, and A wakes (SIGCONT),
// its handler is stopped and its late completion of J1 fenced. J2 must wait for B's J1:
// A's write must not free the slot of attempt 2. A's own run is left out of the overlap:
// a frozen daemon's handler runs on past its lease, which no limit can prevent.
TEST(LimitsE2E, StaleOwnerAfterSigstopDoesNotFreeTheSlotOfTheNewAttempt) {
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string j1 =
      schema.query("INSERT INTO {jobs} (type) VALUES ('call_partner') RETURNING id");
  const std::string script = recorded(runs_file, "if [ \"$0\" = A ] && [ $PGJOBD_JOB_ID = " + j1 +
                                                     " ]; then sleep 60; else sleep 2; fi");
  const auto config_for = [&](const std::string& name) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 4}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("lease", "{duration: 2s}")
        .set("limits", "{partner_api: {types: [call_partner], concurrency: 1}}")
        .handler("call_partner", "{exec: [/bin/sh, -c, " + yaml_quote(script) + ", " + name +
                                     "], kill_grace: 500ms}");
    return yaml.text();
  };
  RunningSampler running(schema, "type = 'call_partner'", runs_file);
  DaemonProcess a(config_for("A"));
  struct Resume {
    DaemonProcess& daemon;
    ~Resume() { daemon.signal(SIGCONT); }
  } resume_a{a};
  ASSERT_TRUE(a.wait_ready()) << a.log();
  ASSERT_TRUE(wait_until([&] { return count_starts(runs_file) == 1; }, 15s))
      << table_summary(schema);
  const std::string a_id = schema.query("SELECT locked_by FROM {jobs} WHERE id = " + j1);
  a.signal(SIGSTOP);

  DaemonProcess b(config_for("B"));
  ASSERT_TRUE(b.wait_ready()) << b.log();
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return schema.count("id = " + j1 + " AND status = 'running' AND attempts = 2") == 1;
      },
      20s))
      << table_summary(schema) << "\n"
      << b.log();
  EXPECT_NE(schema.query("SELECT locked_by FROM {jobs} WHERE id = " + j1), a_id);
  const std::string j2 =
      schema.query("INSERT INTO {jobs} (type) VALUES ('call_partner') RETURNING id");
  a.signal(SIGCONT);
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return schema.count("status = 'done'") == 2;
      },
      30s))
      << table_summary(schema);
  EXPECT_EQ(schema.query("SELECT attempts FROM {jobs} WHERE id = " + j1), "2");
  EXPECT_EQ(schema.query("SELECT attempts FROM {jobs} WHERE id = " + j2), "1");

  std::vector<HandlerRun> runs;
  for (const HandlerRun& run : read_runs(runs_file)) {
    if (!(run.tag == "A" && std::to_string(run.id) == j1)) runs.push_back(run);
  }
  ASSERT_EQ(runs.size(), 2u);
  const HandlerRun& second_attempt = runs[0].attempt == 2 ? runs[0] : runs[1];
  const HandlerRun& other = runs[0].attempt == 2 ? runs[1] : runs[0];
  std::printf(
      "[ limits ] stale owner: J2 started %.3f s after J1's attempt 2 ended (on %s); max "
      "running %lld\n",
      seconds(other.start - second_attempt.end), second_attempt.tag.c_str(),
      static_cast<long long>(running.most()));
  EXPECT_GE(other.start, second_attempt.end) << "J2 ran beside J1's attempt 2";
  EXPECT_EQ(max_overlap(runs), 1);
  EXPECT_LE(running.most(), 1);
  stop_all({a, b});
}

// Whatever ends a running attempt frees its slot (README "Limits"): under `concurrency: 1`
// a job that would run 60 s is cancelled (pgjobd_cancel), and the next one is then deleted
// by hand while it runs; each time the next waiting job starts within a few seconds.
TEST(LimitsE2E, CancelAndDeleteOfARunningJobFreeItsSlot) {
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string script = recorded(runs_file, "exec sleep 60");
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 4}")
      .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
      .set("lease", "{duration: 3s}")
      .set("shutdown", "{timeout: 1s}")
      .set("limits", "{partner_api: {types: [call_partner], concurrency: 1}}")
      .handler("call_partner",
               "{exec: [/bin/sh, -c, " + yaml_quote(script) + ", d1], kill_grace: 300ms}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.insert_jobs("call_partner", 3);
  ASSERT_TRUE(wait_until([&] { return count_starts(runs_file) == 1; }, 15s))
      << table_summary(schema);
  const std::string first = std::to_string(read_runs(runs_file).at(0).id);

  const auto cancelled_at = Clock::now();
  schema.query("SELECT " + quote_identifier(schema.name()) + ".pgjobd_cancel(" + first +
               ", 'limits e2e')");
  ASSERT_TRUE(wait_until([&] { return count_starts(runs_file) == 2; }, 15s))
      << table_summary(schema);
  const double after_cancel = seconds_since(cancelled_at);
  // Its handler stopped, the daemon counts it no more, whether or not its completion is
  // written yet (README "Limits").
  EXPECT_TRUE(wait_until(
      [&] { return schema.query("SELECT status FROM {jobs} WHERE id = " + first) == "cancelled"; },
      10s))
      << table_summary(schema);
  const std::vector<HandlerRun> two = read_runs(runs_file);
  const std::string second = std::to_string(two.at(1).id);

  const auto deleted_at = Clock::now();
  schema.exec("DELETE FROM {jobs} WHERE id = " + second);
  ASSERT_TRUE(wait_until([&] { return count_starts(runs_file) == 3; }, 20s))
      << table_summary(schema) << "\n"
      << daemon.log();
  const double after_delete = seconds_since(deleted_at);
  // The deleted job's handler (`exec sleep 60`: its pid is the shell's) runs on until the
  // daemon learns at a heartbeat that the row is gone; the daemon counts it until it stops
  // (another daemon would not: the row is gone).
  const pid_t deleted_handler = static_cast<pid_t>(two.at(1).pid);
  EXPECT_TRUE(wait_until([&] { return !process_alive(deleted_handler); }, 10s))
      << "the deleted job's handler still runs\n"
      << daemon.log();
  const double handler_gone = seconds_since(deleted_at);
  std::printf(
      "[ limits ] the next job started %.2f s after a cancel, %.2f s after a DELETE of the "
      "running job, whose handler ran on for %.2f s (lease 3s)\n",
      after_cancel, after_delete, handler_gone);
  EXPECT_LT(after_cancel, 3.0);
  EXPECT_LT(after_delete, 6.0) << "one lease (3 s) at most";
  EXPECT_LT(handler_gone, 5.0) << "the deleted job's handler outlived its lease";
  stop_daemon(daemon);
}

// SIGHUP with `concurrency: 1` changed to 2 is applied: one at a time before, two after.
TEST(LimitsE2E, ReloadedLimitIsApplied) {
  constexpr int kJobs = 20;
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const auto config_with = [&](int concurrency) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 4}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("limits", "{partner_api: {types: [call_partner], concurrency: " +
                           std::to_string(concurrency) + "}}")
        .handler("call_partner", named_exec(recorded(runs_file, "sleep 0.3"), "d1"));
    return yaml.text();
  };
  DaemonProcess daemon(config_with(1));
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  RunningSampler running(schema, "type = 'call_partner'", runs_file);
  schema.insert_jobs("call_partner", kJobs);
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return schema.count("status = 'done'") >= 3;
      },
      15s))
      << table_summary(schema);
  EXPECT_EQ(running.most(), 1);

  const std::int64_t reload_sent = epoch_ns();
  const auto reloaded_at = Clock::now();
  std::ofstream(daemon.config_path(), std::ios::trunc) << config_with(2);
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_for_log("configuration reloaded")) << daemon.log();
  RunningSampler running_after(schema, "type = 'call_partner'", runs_file);
  ASSERT_TRUE(wait_until([&] { return running_after.sample() == 2; }, 10s))
      << table_summary(schema);
  const double applied = seconds_since(reloaded_at);
  ASSERT_TRUE(wait_until(
      [&] {
        running_after.sample();
        return schema.count("status = 'done'") == kJobs;
      },
      30s))
      << table_summary(schema);

  const std::vector<HandlerRun> runs = read_runs(runs_file);
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kJobs));
  std::vector<HandlerRun> before;
  std::vector<HandlerRun> after;
  for (const HandlerRun& run : runs) (run.start < reload_sent ? before : after).push_back(run);
  std::printf(
      "[ limits ] reload 1 → 2: 2 running %.2f s after SIGHUP; overlap %d among the %zu runs "
      "started before, %d in all; most running after %lld\n",
      applied, max_overlap(before), before.size(), max_overlap(runs),
      static_cast<long long>(running_after.most()));
  EXPECT_EQ(max_overlap(before), 1);
  EXPECT_EQ(max_overlap(runs), 2);
  EXPECT_LE(running_after.most(), 2);
  EXPECT_LT(applied, 5.0);
  stop_daemon(daemon);
}

// SIGHUP lowering `concurrency: 2` to 1 while two jobs run: both may finish (nothing is
// stopped), but no job starts until fewer than 1 run, i.e. not when the first of the two
// ends while the second still runs. J1 runs 1.5 s, J2 4 s (they take slots 1 and 2), the
// reload is in the database well before J1 ends; J3..J5 must wait for J2.
TEST(LimitsE2E, LoweredLimitStartsNothingUntilTheRunningJobsAreBelowIt) {
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const std::string read_sleep = "s=$(sed -n 's/.*\"sleep\": *\\([0-9.]*\\).*/\\1/p'); ";
  const auto config_with = [&](int concurrency) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 4}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("limits", "{partner_api: {types: [call_partner], concurrency: " +
                           std::to_string(concurrency) + "}}")
        .handler("call_partner",
                 named_exec(recorded(runs_file, "sleep $s", "$0", read_sleep), "d1"));
    return yaml.text();
  };
  DaemonProcess daemon(config_with(2));
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const std::string limits_table = quote_identifier(schema.name()) + ".pgjobd_limits";
  schema.exec(
      "INSERT INTO {jobs} (type, payload) SELECT 'call_partner', jsonb_build_object('sleep', "
      "s) FROM unnest(ARRAY[1.5, 4, 0.3, 0.3, 0.3]) WITH ORDINALITY AS x(s, n) ORDER BY n");
  const std::string j1 = schema.query("SELECT id FROM {jobs} WHERE payload->>'sleep' = '1.5'");
  const std::string j2 = schema.query("SELECT id FROM {jobs} WHERE payload->>'sleep' = '4'");
  ASSERT_TRUE(wait_until([&] { return count_starts(runs_file) >= 2; }, 15s))
      << table_summary(schema);
  std::set<std::string> first_two;
  for (const HandlerRun& run : read_runs(runs_file)) first_two.insert(std::to_string(run.id));
  ASSERT_EQ(first_two, (std::set<std::string>{j1, j2}));

  std::ofstream(daemon.config_path(), std::ios::trunc) << config_with(1);
  daemon.signal(SIGHUP);
  ASSERT_TRUE(wait_until(
      [&] {
        return schema.query("SELECT concurrency FROM " + limits_table +
                            " WHERE name = 'partner_api'") == "1";
      },
      10s))
      << daemon.log();
  const std::int64_t lowered = epoch_ns();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 5; }, 30s))
      << table_summary(schema);

  const std::vector<HandlerRun> runs = read_runs(runs_file);
  ASSERT_EQ(runs.size(), 5u);
  const auto run_of = [&](const std::string& id) {
    for (const HandlerRun& run : runs) {
      if (std::to_string(run.id) == id) return run;
    }
    return HandlerRun{};
  };
  const HandlerRun first = run_of(j1);
  const HandlerRun second = run_of(j2);
  ASSERT_GT(first.end, lowered) << "the reload was not in the database before J1 ended: "
                                   "nothing to see";
  std::ostringstream starts;
  int started_beside_another = 0;
  for (const HandlerRun& run : runs) {
    if (run.id == first.id || run.id == second.id) continue;
    int others = 0;
    for (const HandlerRun& other : runs) {
      if (other.id != run.id && other.start <= run.start && run.start < other.end) ++others;
    }
    started_beside_another += others > 0 ? 1 : 0;
    starts << " " << run.id << "@" << static_cast<int>(seconds(run.start - second.start) * 1000)
           << "ms(" << others << " running)";
  }
  std::printf(
      "[ limits ] lowered 2 → 1 while 2 ran: J1 ended %.2f s, J2 %.2f s after J2 started; "
      "later starts:%s\n",
      seconds(first.end - second.start), seconds(second.end - second.start), starts.str().c_str());
  EXPECT_EQ(started_beside_another, 0)
      << "jobs started under concurrency 1 while another job of the limit ran";
  stop_daemon(daemon);
}

// Two daemons with different `limits:` sections: both warn (the later one replaced the
// other's definition; the other finds the database's differs from its section), and both
// apply the one in the database, the later one's: 2 at once across them, never X's 1 nor
// 2 each.
TEST(LimitsE2E, DifferingSectionsAreWarnedAboutAndAllDaemonsApplyTheDatabases) {
  constexpr int kJobs = 12;
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  const auto config_with = [&](int concurrency, const std::string& name) {
    DaemonYaml yaml(schema.name());
    yaml.set("worker", "{concurrency: 4}")
        .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
        .set("limits", "{partner_api: {types: [call_partner], concurrency: " +
                           std::to_string(concurrency) + "}}")
        .handler("call_partner", named_exec(recorded(runs_file, "sleep 0.3"), name));
    return yaml.text();
  };
  DaemonProcess x(config_with(1, "X"));
  ASSERT_TRUE(x.wait_ready()) << x.log();
  DaemonProcess y(config_with(2, "Y"));
  ASSERT_TRUE(y.wait_ready()) << y.log();
  EXPECT_TRUE(y.wait_for_log("limits: section", 10s)) << y.log();
  EXPECT_TRUE(x.wait_for_log("limits: section", 10s)) << x.log();
  EXPECT_EQ(
      schema.query("SELECT concurrency FROM " + quote_identifier(schema.name()) + ".pgjobd_limits"),
      "2");

  RunningSampler running(schema, "type = 'call_partner'", runs_file);
  schema.insert_jobs("call_partner", kJobs);
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return schema.count("status = 'done'") == kJobs;
      },
      30s))
      << table_summary(schema);
  const std::vector<HandlerRun> runs = read_runs(runs_file);
  ASSERT_EQ(runs.size(), static_cast<std::size_t>(kJobs));
  std::printf(
      "[ limits ] differing sections (1 and 2): max overlap %d (X alone %d, Y alone %d), max "
      "running %lld\n",
      max_overlap(runs), max_overlap(with_tag(runs, "X")), max_overlap(with_tag(runs, "Y")),
      static_cast<long long>(running.most()));
  EXPECT_EQ(max_overlap(runs), 2);
  EXPECT_LE(running.most(), 2);
  stop_all({x, y});
}

// A daemon without a `limits:` section applies what the database holds: X has none and
// runs call_partner; Y defines `concurrency: 2` and has no handler for it. X never runs
// more than 2 at once, though it has 8 workers. Then Y reloads with `limits: {}`, which
// removes the limit: X runs the rest without it.
TEST(LimitsE2E, DaemonWithoutSectionAppliesTheDatabasesLimitsAndEmptySectionRemovesThem) {
  constexpr int kJobs = 12;
  TestSchema schema;
  TempDir dir;
  const std::string runs_file = dir.file("runs");
  DaemonYaml x_yaml(schema.name());
  x_yaml.set("worker", "{concurrency: 8}")
      .set("poll", "{min_interval: 10ms, max_interval: 200ms}")
      .handler("call_partner", named_exec(recorded(runs_file, "sleep 0.3"), "X"));
  DaemonProcess x(x_yaml.text());
  ASSERT_TRUE(x.wait_ready()) << x.log();
  const auto y_config = [&](const std::string& limits) {
    DaemonYaml yaml(schema.name());
    yaml.set("limits", limits).handler("ping", "{builtin: noop}");
    return yaml.text();
  };
  DaemonProcess y(y_config("{partner_api: {types: [call_partner], concurrency: 2}}"));
  ASSERT_TRUE(y.wait_ready()) << y.log();

  RunningSampler running(schema, "type = 'call_partner'", runs_file);
  schema.insert_jobs("call_partner", kJobs);
  ASSERT_TRUE(wait_until(
      [&] {
        running.sample();
        return schema.count("status = 'done'") == kJobs;
      },
      30s))
      << table_summary(schema);
  const std::vector<HandlerRun> limited = read_runs(runs_file);
  ASSERT_EQ(limited.size(), static_cast<std::size_t>(kJobs));
  EXPECT_EQ(max_overlap(limited), 2);
  EXPECT_LE(running.most(), 2);

  const std::string limits_table = quote_identifier(schema.name()) + ".pgjobd_limits";
  std::ofstream(y.config_path(), std::ios::trunc) << y_config("{}");
  y.signal(SIGHUP);
  ASSERT_TRUE(
      wait_until([&] { return schema.query("SELECT count(*) FROM " + limits_table) == "0"; }, 10s))
      << y.log();
  // X learns of it by the NOTIFY the change sends (or at its next heartbeat interval).
  const std::int64_t removed = epoch_ns();
  schema.insert_jobs("call_partner", kJobs);
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 2 * kJobs; }, 30s))
      << table_summary(schema);
  std::vector<HandlerRun> unlimited;
  for (const HandlerRun& run : read_runs(runs_file)) {
    if (run.start > removed) unlimited.push_back(run);
  }
  ASSERT_EQ(unlimited.size(), static_cast<std::size_t>(kJobs));
  std::printf(
      "[ limits ] X without a section: max overlap %d under Y's limit of 2, %d after Y's "
      "limits: {} (X has 8 workers)\n",
      max_overlap(limited), max_overlap(unlimited));
  EXPECT_GT(max_overlap(unlimited), 2) << "the removed limit still holds";
  stop_all({x, y});
}

// Jobs held by a limit, with 1 MB payloads (one partition) and with 1 MB key values
// (another), do not stall the jobs of other keys nor those of a type under no limit
// (issue 42): each held partition runs one job (claimed by another daemon for an hour, as
// a long job would be) and holds 50 more. 2,000 jobs of 2,000 other keys and 2,000 of an
// unlimited type all finish within 20 s (2.9 s here, most of it the first claim reading the
// 100 MB of held payloads once). When each claim read the held payloads (schema v15), a
// claim next to 200 such jobs took 0.4 s with payloads and 5 s with keys: these 4,000 jobs
// would take minutes (442 were done after 20 s).
TEST(LimitsE2E, HeldPartitionsWithMegabytePayloadsAndKeysDoNotStallOtherJobs) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{concurrency: 64}")
      .set("limits", "{per_user: {types: [sync_user], key: user, concurrency: 1}}")
      .handler("sync_user", "{builtin: noop}")
      .handler("report", "{builtin: noop}");
  // 1 MB of hex text: stored out of line, barely compressed.
  const std::string mb = "(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 32768) i)";
  const std::string payloads[] = {"jsonb_build_object('user', 'big', 'pad', " + mb + ")",
                                  "jsonb_build_object('user', " + mb + ")"};
  // Each partition's running job, claimed as another daemon with this limit claims it (with
  // a lease of an hour), then the held ones.
  schema.exec("INSERT INTO " + schema.qualified("pgjobd_limits") +
              " (name, types, key, concurrency) VALUES ('per_user', '{sync_user}', 'user', 1)");
  for (const std::string& payload : payloads)
    schema.exec("INSERT INTO {jobs} (type, payload) SELECT 'sync_user', " + payload);
  schema.exec("SELECT count(*) FROM " + schema.qualified("pgjobd_claim_limited") +
              "('{default}', '{2}', '{sync_user}', 2, 'elsewhere', 3600000, '', 100)");
  ASSERT_EQ(schema.count("status = 'running'"), 2);
  for (const std::string& payload : payloads)
    schema.exec("INSERT INTO {jobs} (type, payload) SELECT 'sync_user', u.p FROM (SELECT " +
                payload + " AS p) u, generate_series(1, 50)");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const auto start = Clock::now();
  schema.exec(
      "INSERT INTO {jobs} (type, payload) SELECT CASE WHEN g % 2 = 0 THEN 'sync_user' ELSE "
      "'report' END, jsonb_build_object('user', 'u' || g) FROM generate_series(1, 4000) g");
  const bool all_done = wait_until([&] { return schema.count("status = 'done'") == 4000; }, 20s);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_TRUE(all_done) << schema.count("status = 'done'") << " of 4000 done\n"
                        << table_summary(schema);
  std::printf(
      "[ limits ] 4,000 jobs next to 2 held partitions of 50 jobs with 1 MB payloads "
      "and keys: done in %.2f s\n",
      took);
  // The held partitions stayed held: only their rows left running elsewhere run.
  EXPECT_EQ(schema.count("status = 'running'"), 2);
  EXPECT_EQ(schema.count("status = 'pending'"), 100);
  stop_daemon(daemon);
}

}  // namespace
}  // namespace pgjobd::testing
