// The scheduler's loop: reconcile, refresh, fire, sleep until the next tick.
#include "schedule/scheduler.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/loop_error.hpp"
#include "metrics/metrics.hpp"
#include "schedule/capacity.hpp"
#include "schedule/tick_plan.hpp"

namespace pgjobd::schedule {
namespace {

TickCalculator calculator_for(const ScheduleTiming& timing) {
  if (timing.cron.empty()) return TickCalculator::every(Seconds(timing.every_seconds));
  return TickCalculator::cron(timing.cron, timing.timezone);
}

TickTime floor_to_seconds(WallClock::time_point t) { return std::chrono::floor<Seconds>(t); }

}  // namespace

Scheduler::Scheduler(std::unique_ptr<ScheduleStore> store, Metrics* metrics,
                     SchedulerSettings settings)
    : store_(std::move(store)), metrics_(metrics), settings_(settings) {}

Scheduler::~Scheduler() { thread_.stop(); }

void Scheduler::set_yaml(std::optional<std::map<std::string, ScheduleConfig>> schedules) {
  {
    std::lock_guard lock(mutex_);
    yaml_ = std::move(schedules);
    yaml_pending_ = true;
    woken_ = true;
  }
  wake_.notify_all();
}

void Scheduler::start() {
  thread_.start([this](const std::stop_token& stop) { loop(stop); });
}

void Scheduler::request_stop() { thread_.request_stop(); }

void Scheduler::join() { thread_.join(); }

void Scheduler::loop(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    const WallClock::time_point next = run_once(WallClock::now());
    std::unique_lock lock(mutex_);
    wake_.wait_until(lock, stop, next, [&] { return woken_; });
    woken_ = false;
  }
}

void Scheduler::reconcile() {
  std::optional<std::map<std::string, ScheduleConfig>> yaml;
  {
    std::lock_guard lock(mutex_);
    if (!yaml_pending_) return;
    yaml = yaml_;
  }
  if (!yaml) {
    // No section: the YAML schedules in the table are another daemon's to write (README
    // "Recurring jobs"); this one fires them as they are.
    {
      std::lock_guard lock(mutex_);
      if (!yaml_) yaml_pending_ = false;  // else a section came meanwhile
    }
    if (reconciled_ || reconcile_held_) {
      spdlog::info(
          "schedules from the config: the config has no schedules: section any more; the "
          "YAML schedules in the table stay as they are and keep firing");
    }
    reconciled_.reset();
    differing_.clear();
    reconcile_held_ = false;
    return;
  }
  std::optional<ReconcileReport> reconciled;
  try {
    reconciled = store_->reconcile(*yaml);
  } catch (const DbError& e) {
    if (e.sqlstate() != ScheduleStore::kLockNotAvailable) throw;
    // A row the reconciliation must change is held: the YAML stays pending, the table's
    // schedules fire as they are.
    if (!reconcile_held_) {
      spdlog::warn(
          "schedules from the config: not applied yet: a schedule row they change is "
          "locked by another session (an open transaction); trying again every {}ms",
          settings_.held_retry.count());
    }
    reconcile_held_ = true;
  }
  if (!reconciled) return;
  if (reconcile_held_) spdlog::info("schedules from the config: applied");
  reconcile_held_ = false;
  {
    std::lock_guard lock(mutex_);
    if (yaml_ == yaml) yaml_pending_ = false;  // else a newer one came meanwhile
  }
  const ReconcileReport& report = *reconciled;
  if (report.added + report.changed + report.removed > 0) {
    spdlog::info("schedules from the config: {} added, {} changed, {} removed", report.added,
                 report.changed, report.removed);
  }
  for (const std::string& name : report.held_by_sql) {
    spdlog::warn(
        "schedule {} in the config is ignored: a schedule of that name was made "
        "with SQL (pgjobd_schedule_upsert)",
        name);
  }
  reconciled_ = std::move(yaml);
  differing_.clear();  // this daemon's section is the table's now
  stale_ = true;
}

// Another daemon with another section reconciled since this one did: the table's YAML rows no
// longer match this daemon's section. Every daemon fires what the table holds, so this is said, not
// undone: said once per schedule until it matches again.
void Scheduler::warn_if_section_differs() {
  if (!reconciled_ || reconcile_held_) return;
  std::map<std::string, const char*> differing;  // name → how
  std::set<std::string> in_table;
  for (const Entry& entry : entries_) {
    const ScheduleRow& row = entry.row;
    in_table.insert(row.name);
    if (row.source != "yaml") continue;  // a SQL schedule the section names: said at reconcile
    const auto mine = reconciled_->find(row.name);
    if (mine == reconciled_->end()) {
      differing[row.name] =
          "is in the table but not in this daemon's section (every daemon fires it)";
    } else if (!same_definition(row, yaml_schedule_row(mine->first, mine->second))) {
      differing[row.name] = "has another definition in the table (every daemon fires that one)";
    }
  }
  for (const auto& mine : *reconciled_) {
    if (!in_table.contains(mine.first)) {
      differing[mine.first] = "of this daemon's section is not in the table (no daemon fires it)";
    }
  }
  std::set<std::string> names;
  for (const auto& [name, how] : differing) {
    if (!differing_.contains(name)) {
      spdlog::warn(
          "schedule {} {}: another daemon's schedules: section differs from this one's and "
          "was reconciled since; give all daemons the same section, or the section to one",
          name, how);
    }
    names.insert(name);
  }
  differing_ = std::move(names);
}

// Schedules made with SQL pass no config check: the table's load is said here, once each time
// it goes over.
void Scheduler::warn_if_over_capacity() {
  double asked = 0;
  for (const Entry& entry : entries_) {
    if (!entry.row.active() || !entry.calculator) continue;
    asked += peak_ticks_per_second(entry.row.timing.cron, entry.row.timing.every_seconds);
  }
  const bool over = asked > kTicksPerSecondCapacity;
  if (over && !over_capacity_) {
    spdlog::warn(
        "schedules: the {} schedules in the table ask for up to {:.0f} ticks per second; the "
        "scheduler fires about {:.0f} ticks per second (more daemons do not add to it): ticks "
        "beyond it are missed and pgjobd_schedule_overdue_seconds grows",
        entries_.size(), asked, kTicksPerSecondCapacity);
  }
  over_capacity_ = over;
}

void Scheduler::refresh(WallClock::time_point now) {
  std::vector<Entry> entries;
  for (ScheduleRow& row : store_->load_schedules()) {
    Entry entry{std::move(row), std::nullopt};
    try {
      entry.calculator = calculator_for(entry.row.timing);
    } catch (const std::invalid_argument& e) {
      // A schedule made with SQL whose cron line the parser refuses: said once per name.
      if (reported_invalid_.insert(entry.row.name).second) {
        spdlog::error("schedule {}: not fired: {}", entry.row.name, e.what());
      }
    }
    entries.push_back(std::move(entry));
  }
  entries_ = std::move(entries);
  refreshed_at_ = now;
  stale_ = false;
  warn_if_section_differs();
  warn_if_over_capacity();
  // A held schedule that is no longer active (the transaction that held it paused or
  // removed it) is not asked for again.
  std::vector<std::string> gone;
  for (const auto& held : held_) {
    const std::string& name = held.first;  // a plain reference: clang 14 cannot capture a binding
    const bool active = std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) {
      return e.row.name == name && e.row.active() && e.calculator;
    });
    if (!active) gone.push_back(name);
  }
  for (const std::string& name : gone) note_free(name, now);
}

void Scheduler::note_held(const std::string& name, TickTime tick, WallClock::time_point now) {
  const auto [it, first] = held_.try_emplace(name, Held{now});
  // A daemon firing the same tick holds the row for milliseconds: only a hold that lasts
  // into the next try is another session's transaction worth a line.
  if (first || it->second.logged || now - it->second.since < settings_.held_retry) return;
  it->second.logged = true;
  std::optional<int> holder;
  try {
    holder = store_->row_holder(name);
  } catch (const DbError&) {
    // The line goes out without the pid.
  }
  spdlog::warn(
      "schedule {}: tick {} waits: its row is locked by another session ({}), an open "
      "transaction that changed or locked it; the other schedules keep firing; trying again "
      "every {}ms",
      name, format_utc(tick), holder ? "pid " + std::to_string(*holder) : "pid unknown",
      settings_.held_retry.count());
}

void Scheduler::note_free(const std::string& name, WallClock::time_point now) {
  const auto it = held_.find(name);
  if (it == held_.end()) return;
  if (it->second.logged) {
    spdlog::info("schedule {}: its row is free again after {}s", name,
                 std::chrono::duration_cast<Seconds>(now - it->second.since).count());
  }
  held_.erase(it);
}

void Scheduler::fire_due(Entry& entry, TickTime now, WallClock::time_point wall_now) {
  ScheduleRow& row = entry.row;
  const TickPlan plan =
      plan_ticks(*entry.calculator, row.misfire, row.misfire_grace, row.last_tick, now);
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const TickStep& step = plan.steps[i];
    FireRequest request;
    request.name = row.name;
    request.timing = row.timing;
    request.expected_last_tick = row.last_tick;
    request.tick = step.tick;
    request.next_tick = i + 1 < plan.steps.size() ? plan.steps[i + 1].tick : plan.next_tick;
    request.insert_job = step.insert_job;
    request.late = step.late;
    const FireResult result = store_->fire(request);
    if (result == FireResult::kHeld) {
      note_held(row.name, step.tick, wall_now);
      return;  // asked again after held_retry; last_tick stays, so its lateness shows
    }
    note_free(row.name, wall_now);
    if (result == FireResult::kLost) {
      stale_ = true;  // another daemon was first, or the row changed: read it again
      return;
    }
    const TickTime previous = row.last_tick;
    row.last_tick = step.tick;
    if (i == 0 && plan.missed > 0) {
      // The first missed tick follows the previous last_tick.
      const TickTime first = entry.calculator->next_after(previous).value_or(step.tick);
      pass_first_missed_ = pass_first_missed_ ? std::min(*pass_first_missed_, first) : first;
    }
    if (i == 0 && plan.missed > 0) {
      spdlog::warn("schedule {}: {} missed tick(s) not fired (misfire policy)", row.name,
                   plan.missed);
      if (metrics_ != nullptr) metrics_->schedule_fires(row.name, "missed", plan.missed);
    }
    if (result == FireResult::kFired) {
      spdlog::debug("schedule {}: fired tick {}{}", row.name, format_utc(step.tick),
                    step.late ? " (late)" : "");
      if (metrics_ != nullptr) metrics_->schedule_fires(row.name, "fired", 1);
    } else if (result == FireResult::kSkippedOverlap) {
      spdlog::info("schedule {}: tick {} skipped: the previous tick's job is still live", row.name,
                   format_utc(step.tick));
      if (metrics_ != nullptr) metrics_->schedule_fires(row.name, "skipped_overlap", 1);
    }
  }
}

WallClock::time_point Scheduler::run_once(WallClock::time_point now) {
  const TickTime now_seconds = floor_to_seconds(now);
  // `now` as the pass goes on (tests pass a clock of their own).
  const WallClock::time_point started = WallClock::now();
  const auto current = [&] { return now + (WallClock::now() - started); };
  // The gauge says the worst lateness this pass found: what it is about to fire is as late
  // as the pass's start says, and a long pass makes the others later as it goes.
  // Set only during and after the pass, so that a scrape between passes never sees less.
  Seconds worst{0};
  WallClock::time_point reported_at;
  const auto report = [&](WallClock::time_point at, bool publish) {
    reported_at = at;
    worst = std::max(worst, overdue_at(at));
    if (publish && metrics_ != nullptr) {
      metrics_->set_schedule_overdue(static_cast<double>(worst.count()));
    }
  };
  pass_first_missed_.reset();
  WallClock::time_point next = now + settings_.refresh;
  bool failed = false;
  try {
    reconcile();
    if (stale_ || !refreshed_at_ || now >= *refreshed_at_ + settings_.refresh) refresh(now);
    report(now, false);
    for (Entry& entry : entries_) {
      if (entry.row.active() && entry.calculator) fire_due(entry, now_seconds, now);
      if (stale_) break;  // the rest are read again first
      const WallClock::time_point at = current();
      if (at - reported_at >= std::chrono::seconds(1)) report(at, true);
    }
    if (stale_) refresh(now);
    next = *refreshed_at_ + settings_.refresh;
  } catch (const std::exception& e) {  // a DbError, or a bug: the pass is lost, not the loop
    spdlog::warn("schedules: {}; trying again in {}ms", e.what(), settings_.retry.count());
    count_loop_error(metrics_, "schedule", "schedule", e);
    next = now + settings_.retry;
    failed = true;
  }
  // Sleep until the earliest next tick.
  for (const Entry& entry : entries_) {
    if (!entry.row.active() || !entry.calculator) continue;
    const std::optional<TickTime> tick = entry.calculator->next_after(entry.row.last_tick);
    if (!tick) continue;
    // After an error the next pass waits for `retry`, due ticks or not; a held row is
    // asked for again after held_retry.
    if (failed) continue;
    next = std::min(next, held_.contains(entry.row.name)
                              ? now + settings_.held_retry
                              : std::max<WallClock::time_point>(*tick, now));
  }
  if (!failed && reconcile_held_) next = std::min(next, now + settings_.held_retry);
  if (!failed) {
    // A pass that missed no tick ends the run of passes that did.
    if (!pass_first_missed_) {
      missing_since_.reset();
    } else if (!missing_since_) {
      missing_since_ = pass_first_missed_;
    }
  }
  report(current(), true);
  return next;
}

// The age of the oldest tick a due schedule has not fired (a held schedule's too: its
// last_tick stays until it fires), or, while every pass misses ticks, of the first tick
// missed since: each such pass fires each schedule's latest tick on time by its own
// measure, which alone would hide an overload. The late fire after a restart shows for
// one pass only.
Seconds Scheduler::overdue_at(WallClock::time_point now) const {
  const TickTime now_seconds = floor_to_seconds(now);
  Seconds overdue{0};
  for (const Entry& entry : entries_) {
    if (!entry.row.active() || !entry.calculator) continue;
    const std::optional<TickTime> tick = entry.calculator->next_after(entry.row.last_tick);
    if (!tick || *tick > now_seconds) continue;
    overdue = std::max(overdue, now_seconds - *tick);
  }
  if (missing_since_ && pass_first_missed_) {
    overdue = std::max(overdue, now_seconds - *missing_since_);
  }
  return overdue;
}

}  // namespace pgjobd::schedule
