#pragma once
// How many ticks per second the scheduler fires at most, and how many a schedule asks for.

#include <cstdint>
#include <string>

namespace pgjobd::schedule {

// What the scheduler can be relied on to fire: one daemon fired 300 to 1,500 ticks per
// second with 2,000 per-second schedules on the shared 2-core test machine (bench/README.md
// "Schedules: capacity"). Each tick is one transaction of three
// statements on one connection, so this is a round-trip bound; more daemons race for the
// same ticks and do not add to it. The config check refuses a `schedules:` section asking
// for more, and the scheduler warns when the table's schedules do.
inline constexpr double kTicksPerSecondCapacity = 400;

// The most ticks per second `cron` or `every_seconds` (exactly one set) can ask for: one per
// interval, or a cron line's seconds per minute (a 5-field line fires once a minute at
// most). 0 for a cron line that does not parse.
double peak_ticks_per_second(const std::string& cron, std::int64_t every_seconds);

}  // namespace pgjobd::schedule
