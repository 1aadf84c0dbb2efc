#pragma once
// What a schedule must do now: which due ticks get a job, which are missed, per its misfire
// policy (README "Recurring jobs"). Pure: the scheduler executes the plan with the store.
//
// The due ticks are those in (last_tick, now]. The latest one is on time when at most
// kOnTime old; every earlier one is missed (its successor is due too). Then:
//   skip  the latest due tick fires (marked late unless on time) if on time or at most
//         misfire_grace old; the other due ticks are missed;
//   all   every due tick fires, oldest first, at most the latest kMaxCatchUp; older ones
//         are missed;
//   none  the latest due tick fires only when on time; the others are missed.
// last_tick always ends at the latest due tick, so a tick is never considered twice.

#include <chrono>
#include <optional>
#include <vector>

#include "schedule/tick_calculator.hpp"
#include "store/schedule_store.hpp"

namespace pgjobd::schedule {

inline constexpr Seconds kOnTime{5};
inline constexpr int kMaxCatchUp = 100;
// Due ticks counted one by one at most (a per-second schedule after 27 hours down); past
// it the count of missed ticks stops growing and the scan restarts an hour before now.
inline constexpr int kMaxScan = 100'000;

struct TickStep {
  TickTime tick;
  bool insert_job = true;
  bool late = false;
};

struct TickPlan {
  std::vector<TickStep> steps;  // executed in order, each a compare-and-set from the last
  int missed = 0;
  std::optional<TickTime> next_tick;  // the first tick after now
};

TickPlan plan_ticks(const TickCalculator& calculator, MisfirePolicy policy, Seconds grace,
                    TickTime last_tick, TickTime now);

}  // namespace pgjobd::schedule
