#pragma once
// `pgjobd bench`: measures the real engine (fetcher, pool, completer, NOTIFY) in-process
// with the built-in no-op handler against a scratch schema, next to the database's own
// ceiling for the same SQL, in one run so the ratios hold on a noisy machine.

#include <optional>
#include <string>

#include "pgjobd/config.hpp"

namespace pgjobd {

struct BenchOptions {
  // The engine's settings (database, poll, lease, ...); the benchmark replaces the schema,
  // worker concurrency, handlers and metrics address.
  Config engine;
  std::string schema = "pgjobd_bench";  // dropped and recreated: never point at real data
  int jobs = 100000;                    // enqueued and burnt down per throughput run
  int concurrency = 64;                 // engine workers, and the ceiling loop's batch size
  int latency_jobs = 1000;              // single INSERTs for the pick-up latency
  double latency_rate = 100;            // of those, per second
  long long finished_rows = 0;          // also measure throughput with this many done rows present
  // Also measure throughput with this many due rows of a type no handler serves, at a
  // higher priority, and with as many due rows in a paused queue the engine serves, against
  // none, with worker.prefetch as configured and with 0.
  int unclaimable_rows = 0;
  // Also measure the first `jobs` of a backlog of this many pending jobs (a second scratch
  // schema, <schema>_backlog) against `jobs` alone, in alternating passes.
  int pending_rows = 0;
  int backlog_passes = 3;
  // Keep the backlog's schema after the run, and reuse one kept before (its jobs not
  // pending deleted, its pending ones topped up to pending_rows): the 10,000,000 rows' load
  // takes minutes.
  bool keep_backlog = false;
  double idle_seconds = 20;  // window for idle_queries_per_s (after backoff)
  bool measure_latency = true;
  bool measure_idle = true;
  // Dependencies (README "Results and workflows"): `workflow_runs` fan-outs of `fan_out`
  // children of one root with one fan-in job over them all, each after a burst of the same
  // number of independent jobs; then a chain of `chain_length` jobs, each waiting for the one
  // before.
  bool measure_workflows = false;
  int fan_out = 10000;
  int workflow_runs = 20;
  int chain_length = 1000;
};

struct BenchReport {
  int jobs = 0;
  int concurrency = 0;
  double enqueue_jobs_per_s = 0;             // bulk INSERT with the NOTIFY trigger
  double enqueue_no_trigger_jobs_per_s = 0;  // the same INSERT with the trigger disabled
  double throughput_jobs_per_s = 0;          // the engine burning down `jobs`
  double ceiling_jobs_per_s = 0;  // claim + complete SQL in a tight loop, same batch size
  double ratio = 0;               // throughput / ceiling
  double cpu_s_per_10k_jobs = 0;  // engine process CPU (user + system)
  double peak_rss_mb = 0;
  double queries_per_job = 0;  // statements the engine sent, per job
  // Pick-up latency: from the INSERT's commit (when the INSERT returned to the client) to
  // the handler's start; and from sending the INSERT, its own commit flush included.
  std::optional<double> latency_p50_ms, latency_p95_ms, latency_p99_ms;
  std::optional<double> latency_from_send_p50_ms, latency_from_send_p95_ms,
      latency_from_send_p99_ms;
  std::optional<double> idle_queries_per_s;
  std::optional<double> idle_cpu_percent;
  std::optional<long long> finished_rows;
  std::optional<double> throughput_with_finished_rows_jobs_per_s;
  std::optional<double> finished_rows_ratio;  // that throughput / throughput_jobs_per_s
  // --unclaimable-rows: jobs/s with those rows (of an unserved type; in a paused queue) over
  // jobs/s without, in one run (median of three pairs each), with prefetch and without. Each
  // burn-down is timed on a running engine, from its jobs' first start to their last finish.
  std::optional<int> unclaimable_rows;
  std::optional<double> unclaimable_ratio_prefetch, unclaimable_ratio_no_prefetch;
  std::optional<double> paused_rows_ratio_prefetch, paused_rows_ratio_no_prefetch;
  // --pending-rows: jobs/s burning down the first `jobs` of that backlog, and of a backlog
  // of `jobs` alone, best of the passes; each pass's ratio (the backlog's rate over the
  // small one's, measured right before it): median, lowest, highest.
  std::optional<int> pending_rows;
  std::optional<double> backlog_jobs_per_s, small_backlog_jobs_per_s;
  std::optional<double> backlog_ratio, backlog_ratio_min, backlog_ratio_max;
  // CPU per job, this process's and the database cluster's, each arm's median over the
  // passes, and the median of the passes' ratios (alone over with the backlog: like
  // backlog_ratio, 1 when the backlog costs nothing). Steadier than jobs/s on a shared
  // machine; unset when the cluster's processes are not on this machine.
  std::optional<double> backlog_cpu_ms_per_job, small_backlog_cpu_ms_per_job;
  std::optional<double> backlog_cpu_ratio;
  bool checkpointed = false;  // a CHECKPOINT ran before every timed burn-down
  // --workflows: from the first child's start to the last one's end, median over the runs;
  // the same for as many independent jobs enqueued at once before each run.
  std::optional<double> fan_out_children_jobs_per_s;
  std::optional<double> independent_jobs_per_s;
  std::optional<double> fan_out_ratio;  // median of each run's children / independent
  // From the last child's handler returning to the fan-in job's start, over the runs.
  std::optional<double> fan_in_start_p50_ms, fan_in_start_p99_ms, fan_in_start_max_ms;
  std::optional<double> chain_links_per_s;  // chain_length / (first start to last end)
};

// Runs every phase; progress goes to the log. Throws on database errors.
BenchReport run_bench(const BenchOptions& options);

std::string bench_report_json(const BenchReport& report);
std::string bench_report_table(const BenchReport& report);

}  // namespace pgjobd
