// The misfire policies over the due ticks of one schedule.
#include "schedule/tick_plan.hpp"

#include <algorithm>
#include <deque>

namespace pgjobd::schedule {

TickPlan plan_ticks(const TickCalculator& calculator, MisfirePolicy policy, Seconds grace,
                    TickTime last_tick, TickTime now) {
  TickPlan plan;
  // The latest kMaxCatchUp + 1 due ticks: `all` needs the one before those it fires.
  std::deque<TickTime> due;
  int count = 0;
  TickTime from = last_tick;
  bool jumped = false;
  while (true) {
    std::optional<TickTime> next = calculator.next_after(from);
    if (!next || *next > now) {
      plan.next_tick = next;
      break;
    }
    if (++count > kMaxScan && !jumped) {
      jumped = true;  // count stays as it is: a lower bound of the missed ticks
      due.clear();
      from = std::max(from, now - std::chrono::hours(1));
      continue;
    }
    due.push_back(*next);
    if (due.size() > static_cast<std::size_t>(kMaxCatchUp) + 1) due.pop_front();
    from = *next;
  }
  if (due.empty()) {
    plan.missed = count;
    if (from > last_tick) plan.steps.push_back({from, false, false});  // after a jump
    return plan;
  }
  const TickTime latest = due.back();
  const bool on_time = now - latest <= kOnTime;
  switch (policy) {
    case MisfirePolicy::kNone:
      plan.steps.push_back({latest, on_time, false});
      plan.missed = count - (on_time ? 1 : 0);
      break;
    case MisfirePolicy::kSkip: {
      const bool fire = on_time || now - latest <= grace;
      plan.steps.push_back({latest, fire, !on_time});
      plan.missed = count - (fire ? 1 : 0);
      break;
    }
    case MisfirePolicy::kAll: {
      // The first step's compare-and-set moves last_tick past the older ticks at once.
      const std::size_t fired = std::min(due.size(), static_cast<std::size_t>(kMaxCatchUp));
      const std::size_t first = due.size() - fired;
      for (std::size_t i = first; i < due.size(); ++i) {
        plan.steps.push_back({due[i], true, !(on_time && due[i] == latest)});
      }
      plan.missed = count - static_cast<int>(fired);
      break;
    }
  }
  return plan;
}

}  // namespace pgjobd::schedule
