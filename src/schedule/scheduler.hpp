#pragma once
// The scheduler: one thread per daemon that reconciles the YAML's schedules into the table
// (at start and on SIGHUP, when the config has a `schedules:` section), sleeps until the
// next tick of any schedule, and fires the due ticks through the store's compare-and-set. Every
// daemon runs one and they race for each tick; the table decides, so correctness does not depend on
// leadership. Idle, it reads the table once per `refresh` (schedules made with SQL show up within
// it).

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "runtime/service.hpp"
#include "schedule/tick_calculator.hpp"
#include "store/schedule_store.hpp"

namespace pgjobd {

class Metrics;

namespace schedule {

using WallClock = std::chrono::system_clock;

struct SchedulerSettings {
  // How often the table is read when no tick is due: an idle daemon's only query.
  std::chrono::milliseconds refresh{30000};
  // Wait after a database error before the next pass.
  std::chrono::milliseconds retry{2000};
  // Wait before asking again for a schedule whose row another session holds (an open
  // transaction around pgjobd_schedule_pause, say); the other schedules fire meanwhile.
  std::chrono::milliseconds held_retry{1000};
};

class Scheduler final : public Service {
 public:
  // `metrics` may be null (tests).
  Scheduler(std::unique_ptr<ScheduleStore> store, Metrics* metrics, SchedulerSettings settings);
  ~Scheduler() override;

  // The config's `schedules:` section: reconciled into the table at the next pass, which
  // this wakes. Without one (nullopt) the table's YAML schedules are left as they are, and
  // a reconciliation still waiting for a held row is given up.
  void set_yaml(std::optional<std::map<std::string, ScheduleConfig>> schedules);

  void start() override;
  void request_stop() override;
  void join() override;

  // One pass at `now`: reconcile if asked, read the table if due, fire what is due.
  // Returns when the next pass should run. Throws nothing; errors are logged.
  WallClock::time_point run_once(WallClock::time_point now);

 private:
  struct Entry {
    ScheduleRow row;
    std::optional<TickCalculator> calculator;  // none: a timing the parser refused
  };

  // A schedule whose row another session held at the last try: since when, and whether
  // the wait was logged (once, when it lasted held_retry).
  struct Held {
    WallClock::time_point since;
    bool logged = false;
  };

  void reconcile();
  void refresh(WallClock::time_point now);
  void warn_if_section_differs();
  void warn_if_over_capacity();
  void fire_due(Entry& entry, TickTime now, WallClock::time_point wall_now);
  void note_held(const std::string& name, TickTime tick, WallClock::time_point now);
  void note_free(const std::string& name, WallClock::time_point now);
  void loop(const std::stop_token& stop);
  // How late the most overdue due tick of entries_ is at `now`.
  Seconds overdue_at(WallClock::time_point now) const;

  const std::unique_ptr<ScheduleStore> store_;
  Metrics* const metrics_;
  const SchedulerSettings settings_;

  std::mutex mutex_;  // guards the three below: set_yaml runs on another thread
  std::condition_variable_any wake_;
  std::optional<std::map<std::string, ScheduleConfig>> yaml_;  // the section; none: no key
  bool yaml_pending_ = false;  // yaml_ is not reconciled (or, without a section, acted on) yet
  bool woken_ = false;         // set_yaml ran since the loop last woke

  // The loop's own state.
  std::vector<Entry> entries_;
  std::optional<WallClock::time_point> refreshed_at_;
  bool stale_ = true;  // a fire was lost or the YAML changed: read the table again
  std::set<std::string> reported_invalid_;
  std::map<std::string, Held> held_;
  // The first tick missed by the current run of passes that each missed ticks (none: the
  // last pass missed none), and the earliest one the pass under way has missed so far. A
  // scheduler that cannot keep up misses ticks on every pass, so the gauge grows from it.
  std::optional<TickTime> missing_since_;
  std::optional<TickTime> pass_first_missed_;
  bool over_capacity_ = false;   // the table's schedules ask for more than it fires (logged)
  bool reconcile_held_ = false;  // the YAML's reconciliation waits for a held row (logged)
  // The section this daemon last reconciled (none: it has none), which the table's YAML
  // rows should match, and the names whose difference was logged (once each).
  std::optional<std::map<std::string, ScheduleConfig>> reconciled_;
  std::set<std::string> differing_;

  ServiceThread thread_;  // last: joined before the members it uses go
};

}  // namespace schedule
}  // namespace pgjobd
