// The benchmark's phases: bulk enqueue (with and without the NOTIFY trigger), the SQL
// ceiling, the engine's burn-down throughput, pick-up latency, idle cost, and throughput
// with many finished rows present.

#include <sys/resource.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "bench/bench.hpp"
#include "db/bench/bench_schema.hpp"
#include "db/pg_job_store.hpp"
#include "handlers/handler_factory.hpp"
#include "pgjobd/engine.hpp"

namespace pgjobd {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kType = "noop";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The fields of /proc/<pid>/stat from the third (state) on: field n is [n - 3]. Empty when
// there is no such process here.
std::vector<std::string> proc_stat(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> fields;
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return fields;
  std::istringstream rest(text.substr(close + 2));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// The postmaster of the server process `backend` (its parent), if it runs on this machine.
std::optional<int> postmaster_of(int backend) {
  std::ifstream comm("/proc/" + std::to_string(backend) + "/comm");
  std::string name;
  if (!std::getline(comm, name) || name != "postgres") return std::nullopt;
  const auto fields = proc_stat(backend);
  if (fields.size() < 2) return std::nullopt;
  return std::stoi(fields[1]);
}

// CPU seconds of the PostgreSQL cluster whose postmaster is `postmaster` (a pid on this
// machine): the postmaster with the children it reaped (ended backends) and its live
// children (backends, vacuum, checkpointer, WAL writer). nullopt when /proc does not show
// it (a server on another machine).
std::optional<double> cluster_cpu_seconds(std::optional<int> postmaster) {
  if (!postmaster) return std::nullopt;
  const auto ticks = [](const std::vector<std::string>& f, std::size_t from, std::size_t n) {
    double sum = 0;
    for (std::size_t i = from - 3; i < from - 3 + n && i < f.size(); ++i) sum += std::stod(f[i]);
    return sum;
  };
  const auto self = proc_stat(*postmaster);
  if (self.size() < 15) return std::nullopt;
  double total = ticks(self, 14, 4);  // utime, stime, cutime, cstime
  // Every process whose parent it is: /proc/<pid>/task/<tid>/children may miss children
  // while they come and go (proc(5)), and a missed busy backend read 0.009 ms a job.
  const std::string parent = std::to_string(*postmaster);
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto f = proc_stat(std::stoi(name));
    if (f.size() >= 13 && f[1] == parent) total += ticks(f, 14, 2);
  }
  return total / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double peak_rss_megabytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// The built-in no-op handler, counting calls and recording when each job started.
class CountingNoop {
 public:
  Handler handler(bool record_starts) {
    return [this, record_starts](const Job& job, const std::stop_token& stop) {
      JobResult result = noop_handler(job, stop);
      if (record_starts) {
        std::lock_guard lock(mutex_);
        starts_[job.id] = Clock::now();
      }
      const long long calls = calls_.fetch_add(1, std::memory_order_relaxed) + 1;
      if (calls == 1) {
        std::lock_guard lock(mutex_);
        first_call_ = Clock::now();
      }
      if (calls >= target_.load()) {
        std::lock_guard lock(mutex_);
        cv_.notify_all();
      }
      return result;
    };
  }
  void expect(long long calls) { target_ = calls; }
  long long calls() const { return calls_.load(); }
  bool wait(std::chrono::seconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return calls_.load() >= target_.load(); });
  }
  std::map<std::int64_t, Clock::time_point> starts() {
    std::lock_guard lock(mutex_);
    return starts_;
  }
  Clock::time_point first_call() {
    std::lock_guard lock(mutex_);
    return first_call_;
  }

 private:
  std::atomic<long long> calls_{0};
  std::atomic<long long> target_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::int64_t, Clock::time_point> starts_;
  Clock::time_point first_call_;
};

Config engine_config(const BenchOptions& options) {
  Config config = options.engine;
  config.worker.concurrency = options.concurrency;
  config.worker.queues = {{"default", {}}};
  config.handlers.clear();  // the benchmark registers its counting no-op
  config.metrics.listen = "";
  return config;
}

struct BurnDown {
  double jobs_per_s = 0;
  double cpu_seconds = 0;
  std::uint64_t round_trips = 0;
};

// Starts an engine on a table holding `jobs` pending jobs and times it until none is left.
BurnDown burn_down(const BenchOptions& options, BenchSchema& table, int jobs) {
  CountingNoop noop;
  noop.expect(jobs);
  Engine engine(engine_config(options));
  engine.register_handler(kType, noop.handler(false));
  const double cpu_before = process_cpu_seconds();
  const std::uint64_t trips_before = PgJobStore::round_trips();
  const auto start = Clock::now();  // includes start-up: conservative
  engine.start();
  if (!noop.wait(std::chrono::seconds(600))) throw std::runtime_error("burn-down timed out");
  // Every handler ran; the last completions are written within milliseconds.
  while (table.any_unfinished()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  BurnDown result;
  result.jobs_per_s = jobs / seconds_since(start);
  result.cpu_seconds = process_cpu_seconds() - cpu_before;
  result.round_trips = PgJobStore::round_trips() - trips_before;
  engine.drain();
  return result;
}

struct FirstJobs {
  double jobs_per_s = 0;
  // CPU per handler call of this process and the database cluster (every process of it:
  // backends, vacuum, checkpointer), from the engine's start to the last of the jobs'
  // completions; nullopt when the cluster's processes are not on this machine.
  std::optional<double> cpu_ms_per_job;
  // From the engine's start to the first handler call, and from the last of the jobs'
  // handler calls to the last of their completions.
  double first_job_ms = 0, last_done_ms = 0;
};

// Starts an engine on `table` and times it through the first `jobs` due jobs in claim
// order, whatever is pending behind them: until the handler ran `jobs` times and each of
// those jobs is done (the engine goes on claiming behind them meanwhile).
FirstJobs burn_first(const BenchOptions& options, BenchSchema& table, int jobs) {
  const auto [first, last] = table.first_due_ids(jobs);
  if (last - first + 1 != jobs)
    throw std::runtime_error("the backlog's first jobs are not consecutive");
  const auto postmaster = postmaster_of(table.backend_pid());
  CountingNoop noop;
  noop.expect(jobs);
  Engine engine(engine_config(options));
  engine.register_handler(kType, noop.handler(false));
  const double cpu_before = process_cpu_seconds();
  const auto db_cpu_before = cluster_cpu_seconds(postmaster);
  const auto start = Clock::now();
  engine.start();
  if (!noop.wait(std::chrono::seconds(600))) throw std::runtime_error("burn-down timed out");
  const auto handled = Clock::now();
  // Polled cheaply while the engine works on behind them, then confirmed row by row (the
  // clock read again if that finds one not done).
  while (table.first_due_unfinished(first, last)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto end = Clock::now();
  const auto db_cpu_after = cluster_cpu_seconds(postmaster);
  const double cpu = process_cpu_seconds() - cpu_before;
  if (table.any_unfinished_between(first, last)) {
    while (table.any_unfinished_between(first, last)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    end = Clock::now();
  }
  FirstJobs result;
  const auto ms = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  result.first_job_ms = ms(noop.first_call() - start);
  result.last_done_ms = ms(end - handled);
  result.jobs_per_s = jobs / std::chrono::duration<double>(end - start).count();
  if (db_cpu_before && db_cpu_after) {
    result.cpu_ms_per_job = (cpu + *db_cpu_after - *db_cpu_before) * 1000 /
                            static_cast<double>(std::max(noop.calls(), 1LL));
  }
  engine.drain();
  return result;
}

// The same claim and complete statements the engine uses, in a tight loop on one
// connection with the engine's batch size, planned as the engine's fetcher and completer
// plan them: what the database can do without us.
double ceiling(const BenchOptions& options, int jobs) {
  PgJobStore store(options.engine.database, "bench-ceiling", StoreUse::kHotPath);
  const ClaimRequest request{{{"default", options.concurrency}},
                             {kType},
                             options.concurrency,
                             "bench-ceiling",
                             Millis(30000)};
  std::vector<Completion> batch;
  const auto start = Clock::now();
  int done = 0;
  while (true) {
    const auto claimed = store.claim(request);
    if (claimed.empty()) break;
    batch.clear();
    for (const auto& job : claimed)
      batch.push_back({{job.id, job.attempt}, Outcome::kDone, {}, {}});
    store.complete(batch, "bench-ceiling", false);
    done += static_cast<int>(claimed.size());
  }
  if (done != jobs) spdlog::warn("ceiling loop finished {} of {} jobs", done, jobs);
  return done / seconds_since(start);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index =
      static_cast<std::size_t>(std::lround(p * static_cast<double>(values.size() - 1)));
  return values[std::min(index, values.size() - 1)];
}

// An idle engine; single INSERTs at a steady rate; time from sending each INSERT
// (autocommit) to its handler's start. Then, still idle, the engine's own query rate.
void latency_and_idle(const BenchOptions& options, BenchSchema& table, BenchReport& report) {
  CountingNoop noop;
  noop.expect(options.latency_jobs);
  Engine engine(engine_config(options));
  engine.register_handler(kType, noop.handler(true));
  engine.start();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let the start-up polls pass
  // Per job: when its INSERT was sent, and when the INSERT returned (its commit, as the
  // client is told of it; the NOTIFY goes out at that commit).
  std::map<std::int64_t, std::pair<Clock::time_point, Clock::time_point>> sent;
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / options.latency_rate));
  auto next = Clock::now();
  for (int i = 0; i < options.latency_jobs; ++i) {
    std::this_thread::sleep_until(next);  // pacing the load generator, not synchronisation
    next += period;
    const auto before = Clock::now();
    const std::int64_t id = table.insert_one();
    sent[id] = {before, Clock::now()};
  }
  if (!noop.wait(std::chrono::seconds(60))) throw std::runtime_error("latency run timed out");
  std::vector<double> from_commit, from_send;
  const auto ms = [](Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  for (const auto& [id, started] : noop.starts()) {
    const auto& [sent_at, committed_at] = sent.at(id);
    from_commit.push_back(ms(started - committed_at));
    from_send.push_back(ms(started - sent_at));
  }
  report.latency_p50_ms = percentile(from_commit, 0.50);
  report.latency_p95_ms = percentile(from_commit, 0.95);
  report.latency_p99_ms = percentile(from_commit, 0.99);
  report.latency_from_send_p50_ms = percentile(from_send, 0.50);
  report.latency_from_send_p95_ms = percentile(from_send, 0.95);
  report.latency_from_send_p99_ms = percentile(from_send, 0.99);
  spdlog::info(
      "latency from the INSERT's commit: p50 {:.2f} ms, p95 {:.2f} ms, p99 {:.2f} ms; from "
      "sending it: p50 {:.2f} ms, p95 {:.2f} ms, p99 {:.2f} ms",
      *report.latency_p50_ms, *report.latency_p95_ms, *report.latency_p99_ms,
      *report.latency_from_send_p50_ms, *report.latency_from_send_p95_ms,
      *report.latency_from_send_p99_ms);

  if (options.measure_idle) {
    // Backoff from min to max interval doubles each empty poll: wait until it is at max.
    const Config config = engine_config(options);
    const auto backoff = config.poll.max_interval * 3;
    spdlog::info("idle: waiting {} ms for the poll backoff, then measuring {} s", backoff.count(),
                 options.idle_seconds);
    std::this_thread::sleep_for(backoff);
    const double cpu_before = process_cpu_seconds();
    const std::uint64_t trips_before = PgJobStore::round_trips();
    std::this_thread::sleep_for(std::chrono::duration<double>(options.idle_seconds));
    report.idle_queries_per_s =
        static_cast<double>(PgJobStore::round_trips() - trips_before) / options.idle_seconds;
    report.idle_cpu_percent = (process_cpu_seconds() - cpu_before) / options.idle_seconds * 100;
  }
  engine.drain();
}

// The first options.jobs of a backlog of options.pending_rows pending jobs (schema
// <schema>_backlog, loaded once; each pass takes the next jobs, so the backlog stays within
// passes × jobs of its size) against options.jobs alone (the bench's schema, loaded
// afresh), alternating, each table VACUUMed and CHECKPOINTed before its run. With
// options.keep_backlog the backlog is kept for the next run, which tops it up.
void backlog(const BenchOptions& options, BenchSchema& table, BenchReport& report) {
  BenchOptions big_options = options;
  big_options.engine.database.schema = options.schema + "_backlog";
  BenchSchema big(big_options.engine.database, kType);
  const long long kept = options.keep_backlog ? big.reuse_pending() : -1;
  if (kept < 0) big.recreate();
  const long long missing = options.pending_rows - std::max(kept, 0LL);
  spdlog::info("backlog: {} pending jobs kept, inserting {}", std::max(kept, 0LL),
               std::max(missing, 0LL));
  if (missing > 0) big.insert_pending(static_cast<int>(missing));
  report.pending_rows = options.pending_rows;
  std::vector<double> ratios, cpu_ratios, small_cpu, large_cpu;
  for (int pass = 0; pass < options.backlog_passes; ++pass) {
    table.truncate();
    table.insert_pending(options.jobs);
    report.checkpointed = table.settle() && report.checkpointed;
    const FirstJobs small = burn_first(options, table, options.jobs);
    report.checkpointed = big.settle() && report.checkpointed;
    const FirstJobs large = burn_first(big_options, big, options.jobs);
    spdlog::info(
        "backlog pass {}: {} of {} pending: {:.0f} jobs/s, {:.4f} CPU ms/job; of {}: "
        "{:.0f} jobs/s, {:.4f} CPU ms/job ({:.3f}); first job after {:.0f} / {:.0f} ms, last "
        "done {:.0f} / {:.0f} ms after its handler",
        pass + 1, options.jobs, options.pending_rows, large.jobs_per_s,
        large.cpu_ms_per_job.value_or(0), options.jobs, small.jobs_per_s,
        small.cpu_ms_per_job.value_or(0), large.jobs_per_s / small.jobs_per_s, large.first_job_ms,
        small.first_job_ms, large.last_done_ms, small.last_done_ms);
    report.small_backlog_jobs_per_s =
        std::max(report.small_backlog_jobs_per_s.value_or(0), small.jobs_per_s);
    report.backlog_jobs_per_s = std::max(report.backlog_jobs_per_s.value_or(0), large.jobs_per_s);
    ratios.push_back(large.jobs_per_s / small.jobs_per_s);
    if (small.cpu_ms_per_job && large.cpu_ms_per_job) {
      small_cpu.push_back(*small.cpu_ms_per_job);
      large_cpu.push_back(*large.cpu_ms_per_job);
      cpu_ratios.push_back(*small.cpu_ms_per_job / *large.cpu_ms_per_job);
    }
  }
  report.backlog_ratio = percentile(ratios, 0.5);
  report.backlog_ratio_min = *std::min_element(ratios.begin(), ratios.end());
  report.backlog_ratio_max = *std::max_element(ratios.begin(), ratios.end());
  if (!cpu_ratios.empty()) {
    report.small_backlog_cpu_ms_per_job = percentile(small_cpu, 0.5);
    report.backlog_cpu_ms_per_job = percentile(large_cpu, 0.5);
    report.backlog_cpu_ratio = percentile(cpu_ratios, 0.5);
  }
  if (!options.keep_backlog) big.drop();
}

double median(std::vector<double> values) { return percentile(std::move(values), 0.5); }

// How long after their INSERT steady_burn_down's jobs come due: past the bulk load, the
// VACUUM and CHECKPOINT before the timing and the engine's start.
constexpr int kSteadyDueAfterMs = 4000;

// `jobs` pending jobs burnt down by an engine already running when they come due, timed
// from their first start to their last finish by the database's clock. The engine's
// start-up is not timed: its first statistics round counts every pending row of the served
// queues (100-250 ms for 200,000 rows on the shared 2-core machine, once per start and per
// 30 s), and inside a burn-down of half a second it weighed a third of it.
double steady_burn_down(const Config& config, BenchSchema& table, int jobs, BenchReport& report) {
  const std::int64_t before = table.max_id();
  const auto due_at = Clock::now() + std::chrono::milliseconds(kSteadyDueAfterMs);
  table.insert_pending_later(jobs, kSteadyDueAfterMs);
  const std::int64_t upto = table.max_id() + 1;
  report.checkpointed = table.settle() && report.checkpointed;
  CountingNoop noop;
  noop.expect(jobs);
  Engine engine(config);
  engine.register_handler(kType, noop.handler(false));
  engine.start();
  if (Clock::now() > due_at - std::chrono::seconds(1)) {
    spdlog::warn("bench: the engine started less than 1 s before its jobs came due");
  }
  if (!noop.wait(std::chrono::seconds(600))) throw std::runtime_error("burn-down timed out");
  while (table.any_unfinished()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  engine.drain();
  return jobs / table.finish_span_seconds(before, upto);
}

// Burn-downs of options.jobs with options.unclaimable_rows due rows ahead of them, at a
// higher priority (README "Claiming": they must not slow the claim), each right after one
// without them: rows of a type no handler serves, and rows of a paused queue the engine
// serves. Three rounds; each ratio is the median of its pairs' (on the shared machine single
// burn-downs of one setup differ by up to 3x, and the best of each setup compared one lucky
// run against the others). With worker.prefetch as configured and with 0.
void unclaimable_rows(const BenchOptions& options, BenchSchema& table, BenchReport& report) {
  report.unclaimable_rows = options.unclaimable_rows;
  enum Rows { kNone, kUnserved, kPaused };
  for (const bool prefetch : {true, false}) {
    Config config = engine_config(options);
    config.worker.queues[BenchSchema::kPausedQueue] = {};
    if (!prefetch) config.worker.prefetch = 0;
    std::vector<double> unserved, paused;  // each pair's ratio
    for (int round = 0; round < 3; ++round) {
      for (const Rows with : {kUnserved, kPaused}) {
        double rates[2] = {0, 0};  // without, with
        for (const Rows rows : {kNone, with}) {
          table.truncate();
          if (rows == kUnserved) table.insert_unserved(options.unclaimable_rows);
          if (rows == kPaused) table.insert_paused(options.unclaimable_rows);
          double& rate = rates[rows == kNone ? 0 : 1];
          rate = steady_burn_down(config, table, options.jobs, report);
          spdlog::info("unclaimable rows: prefetch {}, {} {}: {:.0f} jobs/s",
                       prefetch ? "on" : "off", rows == kNone ? 0 : options.unclaimable_rows,
                       rows == kNone       ? "none"
                       : rows == kUnserved ? "of an unserved type"
                                           : "in a paused queue",
                       rate);
        }
        (with == kUnserved ? unserved : paused).push_back(rates[1] / rates[0]);
      }
    }
    (prefetch ? report.unclaimable_ratio_prefetch : report.unclaimable_ratio_no_prefetch) =
        median(unserved);
    (prefetch ? report.paused_rows_ratio_prefetch : report.paused_rows_ratio_no_prefetch) =
        median(paused);
  }
}

// Fan-outs with one fan-in, next to independent jobs; then a chain. An engine started once,
// idle between runs, as a daemon serving workflows is. Spans and delays are read from the
// rows (started_at, finished_at: the database's clock), so they include the completions,
// where dependencies cost.
void workflows(const BenchOptions& options, BenchSchema& table, BenchReport& report) {
  table.truncate();
  CountingNoop noop;
  Engine engine(engine_config(options));
  engine.register_handler(kType, noop.handler(false));
  engine.start();
  const long long n = options.fan_out;
  long long ran = 0;
  const auto settle = [&](long long runs) {
    noop.expect(ran += runs);
    if (!noop.wait(std::chrono::seconds(600))) throw std::runtime_error("workflow run timed out");
    while (table.any_unfinished()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };

  // Each fan-out run follows a burst of as many independent jobs, and the ratio is the
  // median of each pair's: on a shared machine the load changes between runs, and a ratio
  // of two medians taken minutes apart measured the load (0.62 to 1.15 for one binary).
  std::vector<double> independent, children_rates, pair_ratios, fan_in_ms;
  for (int run = 0; run < options.workflow_runs; ++run) {
    const std::int64_t before = table.max_id();
    table.insert_pending(options.fan_out);
    settle(n);
    independent.push_back(options.fan_out / table.finish_span_seconds(before, table.max_id() + 1));
    nlohmann::json nodes = nlohmann::json::array();
    nodes.push_back({{"ref", "root"}, {"type", kType}});
    nlohmann::json children = nlohmann::json::array();
    for (int i = 0; i < options.fan_out; ++i) {
      const std::string ref = "c" + std::to_string(i);
      nodes.push_back({{"ref", ref}, {"type", kType}, {"depends_on", {"root"}}});
      children.push_back(ref);
    }
    nodes.push_back({{"ref", "fanin"}, {"type", kType}, {"depends_on", children}});
    const auto ids = table.insert_workflow(nodes.dump());
    const std::int64_t root = ids.at("root"), fan_in = ids.at("fanin");
    // One INSERT numbers the workflow's jobs in order: root, the children, the fan-in.
    if (fan_in - root != n + 1) throw std::runtime_error("workflow ids are not consecutive");
    settle(n + 2);
    children_rates.push_back(options.fan_out / table.finish_span_seconds(root, fan_in));
    pair_ratios.push_back(children_rates.back() / independent.back());
    fan_in_ms.push_back(table.start_after_ms(fan_in, root, fan_in));
  }
  report.independent_jobs_per_s = median(independent);
  report.fan_out_children_jobs_per_s = median(children_rates);
  report.fan_out_ratio = median(pair_ratios);
  report.fan_in_start_p50_ms = percentile(fan_in_ms, 0.50);
  report.fan_in_start_p99_ms = percentile(fan_in_ms, 0.99);
  report.fan_in_start_max_ms = *std::max_element(fan_in_ms.begin(), fan_in_ms.end());
  nlohmann::json chain = nlohmann::json::array();
  for (int i = 0; i < options.chain_length; ++i) {
    nlohmann::json node = {{"ref", "l" + std::to_string(i)}, {"type", kType}};
    if (i > 0) node["depends_on"] = {"l" + std::to_string(i - 1)};
    chain.push_back(std::move(node));
  }
  const std::int64_t before_chain = table.max_id();
  table.insert_workflow(chain.dump());
  settle(options.chain_length);
  report.chain_links_per_s =
      options.chain_length / table.finish_span_seconds(before_chain, table.max_id() + 1);
  spdlog::info(
      "workflows: children {:.0f} jobs/s, independent {:.0f} jobs/s (ratio {:.3f}); fan-in "
      "start p50 {:.2f} ms, p99 {:.2f} ms; chain {:.0f} links/s",
      *report.fan_out_children_jobs_per_s, *report.independent_jobs_per_s, *report.fan_out_ratio,
      *report.fan_in_start_p50_ms, *report.fan_in_start_p99_ms, *report.chain_links_per_s);
  engine.drain();
}

}  // namespace

BenchReport run_bench(const BenchOptions& raw_options) {
  BenchOptions options = raw_options;
  options.engine.database.schema = options.schema;
  BenchReport report;
  report.jobs = options.jobs;
  report.concurrency = options.concurrency;
  BenchSchema table(options.engine.database, kType);
  table.recreate();

  // Enqueue: alternate with and without the trigger, best of two each.
  spdlog::info("enqueue: {} jobs per bulk INSERT, with and without the NOTIFY trigger",
               options.jobs);
  for (int round = 0; round < 2; ++round) {
    for (bool trigger : {false, true}) {
      table.truncate();
      table.set_notify_trigger(trigger);
      const auto start = Clock::now();
      table.insert_pending(options.jobs);
      const double rate = options.jobs / seconds_since(start);
      double& best = trigger ? report.enqueue_jobs_per_s : report.enqueue_no_trigger_jobs_per_s;
      best = std::max(best, rate);
    }
  }
  table.set_notify_trigger(true);

  spdlog::info("ceiling: claim + complete loop, batch {}", options.concurrency);
  report.checkpointed = table.settle();
  report.ceiling_jobs_per_s = ceiling(options, options.jobs);

  spdlog::info("throughput: engine with {} workers burning down {} jobs", options.concurrency,
               options.jobs);
  table.truncate();
  table.insert_pending(options.jobs);
  report.checkpointed = table.settle() && report.checkpointed;
  const BurnDown run = burn_down(options, table, options.jobs);
  report.throughput_jobs_per_s = run.jobs_per_s;
  report.ratio = report.throughput_jobs_per_s / report.ceiling_jobs_per_s;
  report.cpu_s_per_10k_jobs = run.cpu_seconds / options.jobs * 10000;
  report.queries_per_job = static_cast<double>(run.round_trips) / options.jobs;
  spdlog::info("throughput {:.0f} jobs/s, ceiling {:.0f} jobs/s, ratio {:.3f}",
               report.throughput_jobs_per_s, report.ceiling_jobs_per_s, report.ratio);

  if (options.measure_latency) {
    table.truncate();
    latency_and_idle(options, table, report);
  }

  if (options.finished_rows > 0) {
    spdlog::info("finished rows: inserting {} done rows", options.finished_rows);
    table.truncate();
    table.insert_finished(options.finished_rows);
    table.insert_pending(options.jobs);
    report.checkpointed = table.settle() && report.checkpointed;
    report.finished_rows = options.finished_rows;
    report.throughput_with_finished_rows_jobs_per_s =
        burn_down(options, table, options.jobs).jobs_per_s;
    report.finished_rows_ratio =
        *report.throughput_with_finished_rows_jobs_per_s / report.throughput_jobs_per_s;
  }
  if (options.unclaimable_rows > 0) unclaimable_rows(options, table, report);
  if (options.pending_rows > 0) backlog(options, table, report);
  if (options.measure_workflows) {
    spdlog::info("workflows: {} fan-outs of {} children with a fan-in, a chain of {}",
                 options.workflow_runs, options.fan_out, options.chain_length);
    workflows(options, table, report);
  }
  report.peak_rss_mb = peak_rss_megabytes();
  table.drop();
  return report;
}

}  // namespace pgjobd
