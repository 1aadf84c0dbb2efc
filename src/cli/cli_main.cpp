// The command line (CLI11): subcommands, options and exit codes.

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>

#include "bench/bench.hpp"
#include "cli/commands.hpp"
#include "pgjobd/version.hpp"

namespace pgjobd {

int cli_main(int argc, char** argv) {
  CLI::App app{"pgjobd: a PostgreSQL-backed job queue daemon"};
  app.set_version_flag("--version", std::string("pgjobd ") + kVersion);
  app.require_subcommand(0, 1);

  const char* env_config = std::getenv("PGJOBD_CONFIG");
  std::string config_path = env_config ? env_config : "/etc/pgjobd/pgjobd.yaml";
  const auto add_config = [&](CLI::App* cmd) {
    cmd->add_option("-c,--config", config_path,
                    "YAML config file (default: $PGJOBD_CONFIG or /etc/pgjobd/pgjobd.yaml)");
  };
  add_config(&app);  // `pgjobd -c FILE` runs the daemon

  auto* run = app.add_subcommand("run", "Run the daemon (the default)");
  add_config(run);
  auto* migrate = app.add_subcommand("migrate", "Create or upgrade the jobs table");
  add_config(migrate);
  auto* check = app.add_subcommand("check-config", "Validate the config file and exit");
  add_config(check);
  std::string check_for = "run";
  check
      ->add_option("--for", check_for,
                   "The subcommand the file is for: run (default; needs a handler) or ui "
                   "(needs ui.listen)")
      ->check(CLI::IsMember({"run", "ui"}));

  EnqueueRequest request;
  std::string run_at, unique_key;
  auto* enqueue = app.add_subcommand("enqueue", "Insert a job");
  add_config(enqueue);
  enqueue->add_option("type", request.type, "Job type (selects the handler)")->required();
  enqueue->add_option("payload", request.payload, "JSON payload (default {})");
  enqueue->add_option("--queue", request.queue, "Queue (default 'default')");
  enqueue->add_option("--priority", request.priority, "Higher runs first (default 0)")
      ->check(CLI::Range(-32768, 32767));
  enqueue->add_option("--run-at", run_at, "Not before this time (e.g. '2026-12-01 10:00Z')");
  enqueue->add_option("--max-attempts", request.max_attempts, "Attempts before dead (default 5)")
      ->check(CLI::Range(1, 1000000));
  enqueue->add_option("--unique-key", unique_key, "At most one live job per (type, key)");

  bool json = false;
  auto* stats = app.add_subcommand("stats", "Job counts by queue and status");
  add_config(stats);
  stats->add_flag("--json", json, "Print JSON");

  std::int64_t job_id = 0;
  auto* retry = app.add_subcommand("retry", "Run a failed, dead or cancelled job again");
  add_config(retry);
  retry->add_option("id", job_id, "Job id")->required();
  auto* cancel = app.add_subcommand(
      "cancel", "Cancel a job: a pending or failed one at once, a running one is stopped");
  add_config(cancel);
  cancel->add_option("id", job_id, "Job id")->required();
  std::string cancel_reason;
  cancel->add_option("--reason", cancel_reason, "Why (kept in last_error)");

  std::string queue;
  auto* pause = app.add_subcommand("pause", "Stop starting jobs of a queue (running ones finish)");
  add_config(pause);
  pause->add_option("queue", queue, "Queue")->required();
  auto* resume = app.add_subcommand("resume", "Start jobs of a paused queue again");
  add_config(resume);
  resume->add_option("queue", queue, "Queue")->required();

  int next_count = 0;
  std::string schedule_name, schedule_from;
  auto* schedules =
      app.add_subcommand("schedules", "List the schedules with their last and next ticks");
  add_config(schedules);
  schedules->add_option("--next", next_count, "Print the next N ticks of schedule NAME")
      ->check(CLI::Range(1, 100000));
  schedules->add_option("name", schedule_name, "Schedule (with --next)");
  schedules->add_option("--from", schedule_from,
                        "With --next: ticks after this time (2027-03-28T01:30:00Z, or local "
                        "2027-03-28T03:30:00 in the schedule's time zone; default now)");

  auto* ui = app.add_subcommand("ui", "Serve only the web dashboard (ui.listen), no workers");
  add_config(ui);
  bool password_stdin = false;
  auto* ui_passwd =
      app.add_subcommand("ui-passwd", "Print a password hash for ui.users (yescrypt)");
  ui_passwd->add_flag("--password-stdin", password_stdin,
                      "Read the password from the first line of stdin instead of the terminal");

  BenchOptions bench_options;
  bool bench_json = false, no_latency = false, no_idle = false;
  auto* bench = app.add_subcommand("bench", "Measure throughput, latency and idle cost");
  add_config(bench);
  bench->add_option("--jobs", bench_options.jobs, "Jobs per throughput run (default 100000)");
  bench->add_option("--concurrency", bench_options.concurrency, "Workers (default 64)");
  bench->add_option("--latency-jobs", bench_options.latency_jobs,
                    "Single INSERTs for the latency run (default 1000)");
  bench->add_option("--latency-rate", bench_options.latency_rate,
                    "Latency INSERTs per second (default 100)");
  bench->add_option("--finished-rows", bench_options.finished_rows,
                    "Also measure with this many done rows in the table (default 0: skip)");
  bench->add_option("--unclaimable-rows", bench_options.unclaimable_rows,
                    "Also measure with this many due rows of an unserved type ahead (default 0)");
  bench->add_option("--pending-rows", bench_options.pending_rows,
                    "Also measure the first --jobs of a backlog of this many (default 0)");
  bench->add_flag("--keep-backlog", bench_options.keep_backlog,
                  "Keep the backlog's schema for the next run, and top up one kept before");
  bench->add_option("--backlog-passes", bench_options.backlog_passes,
                    "Passes with --pending-rows (default 3)");
  bench->add_option("--idle-seconds", bench_options.idle_seconds,
                    "Idle measurement window (default 20)");
  bench
      ->add_option("--schema", bench_options.schema,
                   "Scratch schema, dropped and recreated (default pgjobd_bench)")
      ->check([](const std::string& s) {
        return s.empty() || s.size() > 63 ? std::string("bad schema name") : std::string();
      });
  bench->add_flag("--no-latency", no_latency, "Skip the latency and idle runs");
  bench->add_flag("--no-idle", no_idle, "Skip the idle run");
  bench->add_flag("--workflows", bench_options.measure_workflows,
                  "Also measure fan-out, fan-in and chains of dependent jobs");
  bench->add_option("--fan-out", bench_options.fan_out,
                    "Children per fan-out with --workflows (default 10000)");
  bench->add_option("--workflow-runs", bench_options.workflow_runs,
                    "Fan-out runs with --workflows (default 20)");
  bench->add_option("--chain-length", bench_options.chain_length,
                    "Jobs in the chain with --workflows (default 1000)");
  bench->add_flag("--json", bench_json, "Print JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }

  if (*migrate) return run_migrate(config_path);
  if (*check) {
    return run_check_config(config_path,
                            check_for == "ui" ? ConfigUse::kDashboard : ConfigUse::kDaemon);
  }
  if (*enqueue) {
    if (!run_at.empty()) request.run_at = run_at;
    if (!unique_key.empty()) request.unique_key = unique_key;
    return run_enqueue(config_path, request);
  }
  if (*stats) return run_stats(config_path, json);
  if (*retry) return run_retry(config_path, job_id);
  if (*cancel) {
    return run_cancel(config_path, job_id,
                      cancel->count("--reason") > 0 ? std::optional(cancel_reason) : std::nullopt);
  }
  if (*pause) return run_pause(config_path, queue);
  if (*resume) return run_resume(config_path, queue);
  if (*schedules) {
    if ((next_count > 0) != !schedule_name.empty() || (!schedule_from.empty() && next_count == 0)) {
      std::cerr << "usage: pgjobd schedules [-c FILE] [--next N NAME [--from TIME]]\n";
      return kExitUsage;
    }
    return run_schedules(config_path, next_count, schedule_name, schedule_from);
  }
  if (*ui) return run_ui(config_path);
  if (*ui_passwd) return run_ui_passwd(password_stdin);
  if (*bench) {
    bench_options.measure_latency = !no_latency;
    bench_options.measure_idle = !no_idle;
    const bool config_given = bench->count("--config") > 0 || app.count("--config") > 0;
    return run_bench_command(config_path, config_given, bench_options, bench_json);
  }
  return run_daemon(config_path);
}

}  // namespace pgjobd
