#pragma once
// The limits as the database holds them (README "Limits"): what LimitRegistry reads on the
// claim session and writes and reads on the limits sync's.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "store/db_error.hpp"

namespace pgjobd {

// A limit as the database holds it (README "Limits"): what every daemon applies.
struct LimitDefinition {
  std::string name;
  LimitConfig limit;  // rate is left empty: rate_per_second holds it
  std::string written_by;

  bool operator==(const LimitDefinition&) const = default;
};

// One change sync_limits made: change is "added", "changed" or "removed".
struct LimitChange {
  std::string name;
  std::string change;
  std::string previous_writer;  // who wrote the definition it replaced ("" for added)
};

// What sync_limits did: wrote the limits (changes), or wrote nothing because another
// session held a lock it needs for longer than the function waits (README "Limits").
struct LimitSync {
  std::vector<LimitChange> changes;
  std::string busy;  // non-empty when nothing was written: what holds the lock
};

// A limit's use now: slots held (jobs running under it) over all its partitions.
struct LimitUsage {
  std::string name;
  std::int64_t running = 0;
  std::int64_t partitions = 0;  // partitions with a running job
};

// Reads the limits; a base of every store whose part reads them (virtual: one session
// implements it once for all).
class LimitReader {
 public:
  virtual ~LimitReader() = default;

  // The limits every daemon applies, by name.
  virtual std::vector<LimitDefinition> load_limits() = 0;
};

// The limits sync's session (LimitsSync): writes this daemon's section, reads everyone's.
class LimitStore : public virtual LimitReader {
 public:
  ~LimitStore() override = default;

  // Makes the database's limits exactly `limits` (a daemon's `limits:` section), marking
  // them written by `writer`; returns what changed, or that another session's lock kept it
  // from writing (it waits for a lock 200 ms at most).
  virtual LimitSync sync_limits(const std::map<std::string, LimitConfig>& limits,
                                const std::string& writer) = 0;

  // Each limit's use now.
  virtual std::vector<LimitUsage> limit_usage() = 0;
};

}  // namespace pgjobd
