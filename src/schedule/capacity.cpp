// Peak tick rates of schedule timings, against the scheduler's measured capacity.
#include "schedule/capacity.hpp"

#include "schedule/cron_expression.hpp"

namespace pgjobd::schedule {

double peak_ticks_per_second(const std::string& cron, std::int64_t every_seconds) {
  if (cron.empty()) return every_seconds > 0 ? 1.0 / static_cast<double>(every_seconds) : 0;
  try {
    return static_cast<double>(parse_cron(cron).seconds.count()) / 60.0;
  } catch (const CronError&) {
    return 0;  // refused elsewhere, with the reason
  }
}

}  // namespace pgjobd::schedule
