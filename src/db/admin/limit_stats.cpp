// read_limit_stats: the limits and their use, as operators see them.

#include "db/admin/limit_stats.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <tuple>

#include "db/sql_text.hpp"
#include "db/statement_set.hpp"

namespace pgjobd {

namespace {

// `count` when it is a whole number (within the rounding of a division by 60 or 3600).
std::optional<long long> whole(double count) {
  const double rounded = std::round(count);
  if (rounded < 1 || std::abs(count - rounded) > 1e-9 * rounded) return std::nullopt;
  return static_cast<long long>(rounded);
}

// A rate from the starts per second alone, as describe_limit_rate says. 60/m and 1/s are
// the same number: the per-minute form is the one the README's examples use.
std::string rate_from_per_second(double per_second) {
  if (const auto n = whole(per_second); n && *n > 1) return std::to_string(*n) + "/s";
  if (const auto m = whole(per_second * 60)) return std::to_string(*m) + "/m";
  if (const auto h = whole(per_second * 3600)) return std::to_string(*h) + "/h";
  char text[64];
  std::snprintf(text, sizeof text, "%g/s", per_second);
  return text;
}

}  // namespace

std::string describe_limit_rate(const std::string& written, double per_second, int burst) {
  // Empty for a row an older daemon wrote, which kept starts per second only.
  const std::string rate = written.empty() ? rate_from_per_second(per_second) : written;
  return "rate " + rate + (burst == 1 ? "" : ", burst " + std::to_string(burst));
}

std::vector<LimitStatsRow> read_limit_stats(pqxx::transaction_base& txn,
                                            const std::string& schema) {
  // The daemon's own statements (one place for the rule of which job counts), sent
  // unnamed: a command's one-off session has nothing to prepare them for.
  const StatementSet statements(stmt::job_statements(quote_identifier(schema)), true,
                                Planning::kEachExecution);
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> usage;
  for (const auto& row : statements.execute(txn, stmt::kLimitUsage)) {
    usage[row[0].c_str()] = {row[1].as<std::int64_t>(), row[2].as<std::int64_t>()};
  }
  std::vector<LimitStatsRow> rows;
  for (const auto& row : statements.execute(txn, stmt::kLimitsLoad)) {
    LimitStatsRow out;
    out.name = row[0].c_str();
    std::vector<std::string> parts;
    const auto list = [](const std::string& json) {
      std::string text;
      for (const auto& item : nlohmann::json::parse(json)) {
        text += (text.empty() ? "" : ", ") + item.get<std::string>();
      }
      return "[" + text + "]";
    };
    if (std::string(row[1].c_str()) != "[]") parts.push_back("types " + list(row[1].c_str()));
    if (std::string(row[2].c_str()) != "[]") parts.push_back("queues " + list(row[2].c_str()));
    if (!std::string(row[3].c_str()).empty()) parts.push_back(std::string("key ") + row[3].c_str());
    if (row[4].as<int>() > 0) parts.push_back("concurrency " + std::to_string(row[4].as<int>()));
    if (row[5].as<double>() > 0) {
      parts.push_back(describe_limit_rate(row[8].c_str(), row[5].as<double>(), row[6].as<int>()));
    }
    for (const auto& part : parts) out.definition += (out.definition.empty() ? "" : ", ") + part;
    const auto use = usage.find(out.name);
    if (use != usage.end()) std::tie(out.running, out.partitions) = use->second;
    rows.push_back(std::move(out));
  }
  return rows;
}

}  // namespace pgjobd
