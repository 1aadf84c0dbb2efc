// `pgjobd bench`: runs the benchmark and prints its report.

#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "bench/bench.hpp"
#include "cli/commands.hpp"
#include "cli/config_loading.hpp"
#include "log/logging.hpp"
#include "log/secrets.hpp"

namespace pgjobd {

int run_bench_command(const std::string& config_path, bool config_given, BenchOptions options,
                      bool json) {
  Config config;
  // Without -c, the database comes from the environment alone (DATABASE_URL).
  if (config_given || std::filesystem::exists(config_path)) {
    auto loaded = load_config_or_report(config_path);
    if (!loaded) return kExitUsage;
    config = *loaded;
  } else {
    apply_environment(config);
    add_database_secrets(config.database.url);  // load_config_or_report does it otherwise
  }
  config.log.level = "info";
  setup_logging(config.log);
  if (options.schema == config.database.schema || options.schema == "public" ||
      (options.pending_rows > 0 && options.schema + "_backlog" == config.database.schema)) {
    std::cerr << "error: --schema " << options.schema
              << " would be dropped and recreated: use a scratch schema (default pgjobd_bench)\n";
    return kExitUsage;
  }
  if (options.pending_rows > 0 && options.schema.size() > 55) {
    std::cerr << "error: with --pending-rows, --schema must be at most 55 characters (the "
                 "backlog's schema adds _backlog)\n";
    return kExitUsage;
  }
  options.engine = config;
  if (options.jobs < 1 || options.concurrency < 1 || options.latency_jobs < 1 ||
      options.latency_rate <= 0 || options.finished_rows < 0 || options.unclaimable_rows < 0 ||
      options.pending_rows < 0 || options.backlog_passes < 1 || options.idle_seconds <= 0 ||
      options.fan_out < 1 || options.workflow_runs < 1 || options.chain_length < 2) {
    std::cerr << "error: --jobs, --concurrency, --latency-jobs, --latency-rate, "
                 "--idle-seconds, --fan-out, --workflow-runs and --backlog-passes must be "
                 "positive, "
                 "--chain-length at least 2\n";
    return kExitUsage;
  }
  try {
    const BenchReport report = run_bench(options);
    std::cout << (json ? bench_report_json(report) : bench_report_table(report)) << std::endl;
    return kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "error: " << mask_password(e.what()) << "\n";
    return kExitFailure;
  }
}

}  // namespace pgjobd
