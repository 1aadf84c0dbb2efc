// read_limit_stats: the limits and their use, as operators see them.

#include "db/admin/limit_stats.hpp"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <tuple>

#include "db/sql_text.hpp"
#include "db/statement_set.hpp"

namespace pgjobd {

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
      char rate[64];
      std::snprintf(rate, sizeof rate, "rate %g/s burst %d", row[5].as<double>(), row[6].as<int>());
      parts.emplace_back(rate);
    }
    for (const auto& part : parts) out.definition += (out.definition.empty() ? "" : ", ") + part;
    const auto use = usage.find(out.name);
    if (use != usage.end()) std::tie(out.running, out.partitions) = use->second;
    rows.push_back(std::move(out));
  }
  return rows;
}

}  // namespace pgjobd
