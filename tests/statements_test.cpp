// The text of the prepared statements (src/db/statements.cpp, ui/ui_statements.cpp): each
// binds the parameters its header documents, no more and no fewer, every fragment filled
// in with parameters of the type the statement gives them.

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "db/sql_text.hpp"
#include "db/statements.hpp"
#include "db/ui/ui_statements.hpp"

namespace pgjobd {
namespace {

const std::string kStatementSchema = quote_identifier("s");

std::vector<stmt::Statement> all_statements() {
  std::vector<stmt::Statement> all = stmt::job_statements(kStatementSchema);
  for (auto& statement : stmt::schedule_statements(kStatementSchema)) all.push_back(statement);
  return all;
}

// The numbers of the $n parameters `sql` reads.
std::set<int> parameter_numbers(const std::string& sql) {
  static const std::regex parameter(R"(\$([0-9]+))");
  std::set<int> numbers;
  for (std::sregex_iterator it(sql.begin(), sql.end(), parameter), end; it != end; ++it) {
    numbers.insert(std::stoi((*it)[1]));
  }
  return numbers;
}

// The number of parameters statements.hpp documents for each statement.
const std::map<std::string, int> kDocumentedParameters = {
    {stmt::kClaim, 8},
    {stmt::kClaimWithDue, 9},
    {stmt::kClaimIds, 9},
    {stmt::kClaimInRoom, 8},
    {stmt::kNextDue, 3},
    {stmt::kComplete, 11},
    {stmt::kCompleteDeleteDone, 11},
    {stmt::kCompleteSkipLocked, 10},
    {stmt::kCompleteDeleteDoneSkipLocked, 10},
    {stmt::kCompleteOneDone, 4},
    {stmt::kCompleteOneDelete, 4},
    {stmt::kHeartbeat, 4},
    {stmt::kLeadAndRescue, 6},
    {stmt::kResign, 1},
    {stmt::kPrune, 5},
    {stmt::kRepairDependencies, 1},
    {stmt::kQueueStats, 2},
    {stmt::kQueueStatsPlanning, 0},
    {stmt::kPausedQueues, 1},
    {stmt::kDeadLettersSync, 3},
    {stmt::kDaemonReport, 7},
    {stmt::kDaemonRemove, 1},
    {stmt::kDaemonExpire, 0},
    {stmt::kNotifyFinished, 1},
    {stmt::kClaimLimited, 10},
    {stmt::kClaimRoom, 4},
    {stmt::kLimitsSync, 2},
    {stmt::kLimitsLoad, 0},
    {stmt::kLimitUsage, 0},
    {stmt::kLimitGarbage, 2},
    {stmt::kScheduleLoad, 0},
    {stmt::kScheduleLock, 6},
    {stmt::kScheduleHolder, 1},
    {stmt::kScheduleLockTimeout, 1},
    {stmt::kScheduleInsertJob, 3},
    {stmt::kScheduleAdvance, 4},
    {stmt::kScheduleSqlHeld, 1},
    {stmt::kScheduleUpsertYaml, 13},
    {stmt::kScheduleDeleteYaml, 1},
};

// A fragment given a parameter number its statement does not bind (or leaving one out)
// shows here: the statement reads exactly $1..$n, n as documented.
TEST(Statements, EachReadsExactlyTheParametersItsHeaderDocuments) {
  const auto statements = all_statements();
  EXPECT_EQ(statements.size(), kDocumentedParameters.size());
  for (const auto& statement : statements) {
    SCOPED_TRACE(statement.name);
    const auto documented = kDocumentedParameters.find(statement.name);
    ASSERT_NE(documented, kDocumentedParameters.end());
    std::set<int> expected;
    for (int n = 1; n <= documented->second; ++n) expected.insert(n);
    EXPECT_EQ(parameter_numbers(statement.sql), expected);
  }
}

// A fragment that reads a parameter as another type than the rest of its statement (a
// wrong number given to it) shows here: every cast of one parameter names one type.
TEST(Statements, EveryCastOfAParameterNamesOneType) {
  static const std::regex cast(R"(\$([0-9]+)::([a-z0-9_]+(\[\])?))");
  for (const auto& statement : all_statements()) {
    SCOPED_TRACE(statement.name);
    std::map<std::string, std::set<std::string>> types;
    for (std::sregex_iterator it(statement.sql.begin(), statement.sql.end(), cast), end; it != end;
         ++it) {
      types[(*it)[1]].insert((*it)[2]);
    }
    for (const auto& [number, names] : types) EXPECT_EQ(names.size(), 1u) << "$" << number;
  }
}

TEST(Statements, NoPlaceholderIsLeftUnfilled) {
  static const std::regex placeholder(R"(\{[a-z_]+\})");
  std::vector<std::string> texts;
  for (const auto& statement : all_statements()) texts.push_back(statement.sql);
  const stmt::UiStatements ui = stmt::ui_statements(kStatementSchema);
  for (const std::string* text :
       {&ui.overview_counts, &ui.throughput, &ui.daemons, &ui.jobs, &ui.job_row, &ui.job,
        &ui.job_attempts, &ui.queues, &ui.schedules, &ui.audit, &ui.audit_insert}) {
    texts.push_back(*text);
  }
  for (const auto& text : texts) EXPECT_FALSE(std::regex_search(text, placeholder)) << text;
}

TEST(Statements, WithTablesNamesTheSchemasTables) {
  EXPECT_EQ(stmt::with_tables("{jobs} {leader} {queues} {daemons} {schedules} {limits} "
                              "{limit_buckets} {audit} {schema}.f()",
                              quote_identifier("a b")),
            "\"a b\".jobs \"a b\".pgjobd_leader \"a b\".pgjobd_queues \"a b\".pgjobd_daemons "
            "\"a b\".pgjobd_schedules \"a b\".pgjobd_limits \"a b\".pgjobd_limit_buckets "
            "\"a b\".pgjobd_audit \"a b\".f()");
}

}  // namespace
}  // namespace pgjobd
