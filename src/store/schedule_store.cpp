// A `schedules:` entry as its row, and the comparison of two rows' definitions.

#include "store/schedule_store.hpp"

#include <nlohmann/json.hpp>

namespace pgjobd {
namespace {

// Payloads as JSON values: jsonb keeps neither the key order nor the spacing of the text
// it was given, so two texts of one value must compare equal.
bool same_json(const std::string& a, const std::string& b) {
  if (a == b) return true;
  const nlohmann::json left = nlohmann::json::parse(a, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json right = nlohmann::json::parse(b, nullptr, /*allow_exceptions=*/false);
  return !left.is_discarded() && !right.is_discarded() && left == right;
}

}  // namespace

MisfirePolicy misfire_policy(std::string_view text) {
  if (text == "all") return MisfirePolicy::kAll;
  if (text == "none") return MisfirePolicy::kNone;
  return MisfirePolicy::kSkip;
}

ScheduleRow yaml_schedule_row(const std::string& name, const ScheduleConfig& schedule) {
  ScheduleRow row;
  row.name = name;
  row.timing.cron = schedule.cron;
  row.timing.every_seconds = schedule.every.count() / 1000;
  row.timing.timezone = schedule.timezone;
  row.type = schedule.type;
  row.queue = schedule.queue;
  row.source = "yaml";
  row.priority = schedule.priority;
  row.max_attempts = schedule.max_attempts;
  row.payload = schedule.payload;
  row.enabled = schedule.enabled;
  row.overlap_skip = schedule.overlap == "skip";
  row.misfire = misfire_policy(schedule.misfire);
  // Whole seconds in the table, rounded up: a grace is never shortened.
  row.misfire_grace = std::chrono::seconds((schedule.misfire_grace.count() + 999) / 1000);
  return row;
}

bool same_definition(const ScheduleRow& a, const ScheduleRow& b) {
  return a.name == b.name && a.timing == b.timing && a.type == b.type && a.queue == b.queue &&
         a.source == b.source && a.priority == b.priority && a.max_attempts == b.max_attempts &&
         a.enabled == b.enabled && a.overlap_skip == b.overlap_skip && a.misfire == b.misfire &&
         a.misfire_grace == b.misfire_grace && same_json(a.payload, b.payload);
}

}  // namespace pgjobd
