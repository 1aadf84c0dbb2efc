// `pgjobd schedules`: every schedule in the table with its last and next tick, and
// `--next N NAME`: the next ticks of one schedule (from the config when it is there, so a
// cron line can be checked before it is deployed, without a database).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/config_loading.hpp"
#include "cli/error_output.hpp"
#include "db/pg_database.hpp"
#include "log/logging.hpp"
#include "log/secrets.hpp"
#include "schedule/tick_calculator.hpp"

namespace pgjobd {
namespace {

using schedule::format_local;
using schedule::format_utc;
using schedule::Instant;
using schedule::TickCalculator;

TickCalculator calculator_for(const ScheduleTiming& timing) {
  if (timing.cron.empty()) {
    return TickCalculator::every(std::chrono::seconds(timing.every_seconds));
  }
  return TickCalculator::cron(timing.cron, timing.timezone);
}

ScheduleTiming timing_of(const ScheduleConfig& config) {
  return {config.cron, config.every.count() / 1000, config.timezone};
}

std::string describe(const ScheduleTiming& timing) {
  if (!timing.cron.empty()) return "cron \"" + timing.cron + "\" " + timing.timezone;
  return "every " + format_duration(std::chrono::seconds(timing.every_seconds));
}

// "2027-03-28T01:00:00Z (2027-03-28 03:00:00 CEST)"
std::string both(Instant t, const std::string& time_zone) {
  return format_utc(t) + " (" + format_local(t, time_zone) + ")";
}

int print_next(const ScheduleTiming& timing, int count, const std::string& from) {
  const TickCalculator calculator = calculator_for(timing);
  Instant t = from.empty()
                  ? std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now())
                  : schedule::parse_instant(from, timing.timezone);
  for (int i = 0; i < count; ++i) {
    const std::optional<Instant> next = calculator.next_after(t);
    if (!next) break;
    std::cout << format_utc(*next) << "  " << format_local(*next, timing.timezone) << "\n";
    t = *next;
  }
  return kExitOk;
}

}  // namespace

int run_schedules(const std::string& config_path, int next_count, const std::string& name,
                  const std::string& from) {
  const auto config = load_config_or_report(config_path);
  if (!config) return kExitUsage;
  setup_logging(config->log);
  try {
    if (next_count > 0 && config->schedules) {
      if (auto it = config->schedules->find(name); it != config->schedules->end()) {
        return print_next(timing_of(it->second), next_count, from);
      }
    }
    PgDatabase database(config->database);
    std::vector<ScheduleRow> rows = database.open_schedule_store("cli")->load_schedules();
    if (next_count > 0) {
      auto it = std::find_if(rows.begin(), rows.end(),
                             [&](const ScheduleRow& row) { return row.name == name; });
      if (it == rows.end()) {
        return print_error("no schedule " + name + " in " + config_path + " or in the database",
                           kExitFailure);
      }
      return print_next(it->timing, next_count, from);
    }
    if (rows.empty()) std::cout << "no schedules\n";
    for (const ScheduleRow& row : rows) {
      std::cout << row.name << " (" << row.source << ", "
                << (!row.enabled ? "disabled"
                    : row.paused ? "paused"
                                 : "active")
                << "): " << describe(row.timing) << ", type " << row.type << ", queue " << row.queue
                << "\n";
      std::cout << "  last tick: " << both(row.last_tick, row.timing.timezone) << "\n";
      try {
        const std::optional<Instant> next = calculator_for(row.timing).next_after(row.last_tick);
        std::cout << "  next tick: "
                  << (next ? both(*next, row.timing.timezone) : std::string("none")) << "\n";
      } catch (const std::invalid_argument& e) {
        std::cout << "  not fired: " << e.what() << "\n";
      }
    }
    return kExitOk;
  } catch (const DbError& e) {
    return print_db_error(e, config->database, kExitFailure);
  } catch (const std::exception& e) {
    return print_error(e.what(), kExitFailure);
  }
}

}  // namespace pgjobd
