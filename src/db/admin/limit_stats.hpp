#pragma once
// Every limit with its use now, for operators (`pgjobd stats`, the dashboard's queues
// page), read with the daemon's own statements: one place says which job counts.

#include <cstdint>
#include <string>
#include <vector>

namespace pqxx {
class transaction_base;
}

namespace pgjobd {

// A limit (README "Limits") and its use now.
struct LimitStatsRow {
  std::string name;
  std::string definition;  // "types [a, b], key user, concurrency 3, rate 10/s, burst 20"
  std::int64_t running = 0;
  std::int64_t partitions = 0;  // partitions with a running job
};

// A rate as YAML writes it (README "Limits"): `written`, the text the writing daemon's
// YAML had; when that is empty (a row an older daemon wrote), from the starts per second:
// per second when that is a whole number above 1, else per minute, else per hour when
// whole (60/m, 30/m for 0.5/s, 100/h), else per second as it is. "rate R", and ", burst B"
// when B is not the default 1.
std::string describe_limit_rate(const std::string& written, double per_second, int burst);

// `schema` unquoted. Two statements in `txn`.
std::vector<LimitStatsRow> read_limit_stats(pqxx::transaction_base& txn, const std::string& schema);

}  // namespace pgjobd
