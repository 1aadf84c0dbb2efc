// The hot-path statements' functions for sessions behind a transaction pooler (see the
// header).
#include "db/pooled_functions.hpp"

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string_view>

#include "db/connection.hpp"
#include "db/sql_text.hpp"
#include "db/statement_set.hpp"
#include "db/statements.hpp"

namespace pgjobd {
namespace {

// The statements the hot-path sessions (the claim's and the completions') send hundreds of
// times a second behind a pooler: the claims, the completions (their skip-locked forms
// too), and the wait for the next due job (asked apart from the claim there). Each returns
// rows, as RETURN QUERY needs.
constexpr const char* kKept[] = {
    stmt::kClaim,
    stmt::kClaimIds,
    stmt::kClaimInRoom,
    stmt::kNextDue,
    stmt::kComplete,
    stmt::kCompleteDeleteDone,
    stmt::kCompleteSkipLocked,
    stmt::kCompleteDeleteDoneSkipLocked,
};

// The dollar quote around a function's body; a statement never contains it.
constexpr std::string_view kBodyQuote = "$pgjobd_pooled$";

// FNV-1a, 64 bits: a name for a text, stable across builds and machines. Not a guard
// against anyone: only the schema's owner creates functions in it.
std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string hex12(std::uint64_t value) {
  char digits[17];
  std::snprintf(digits, sizeof digits, "%016llx", static_cast<unsigned long long>(value));
  return std::string(digits + 4, 12);
}

std::vector<PooledFunction> name_functions() {
  // The text with the schema's place kept as "{schema}" (with_tables leaves it so), so
  // that every schema's function of one statement has the same name.
  const std::vector<stmt::Statement> statements = stmt::job_statements("{schema}");
  std::vector<PooledFunction> functions;
  for (const char* name : kKept) {
    const std::string_view bare = std::string_view(name).substr(std::string_view("pgjobd_").size());
    functions.push_back({name, "pgjobd_pooled_" + std::string(bare) + "_" +
                                   hex12(fnv1a(stmt::statement_named(statements, name).sql))});
  }
  return functions;
}

// CREATE OR REPLACE FUNCTION for one statement: its parameters and columns as the server
// describes them, the columns named c1, c2, ... (read by position; names no statement
// uses), and the planner settings of a pinned session for the call only.
std::string create_function(pqxx::dbtransaction& txn, const std::string& schema,
                            const std::string& function, const std::string& sql) {
  if (sql.find(kBodyQuote) != std::string::npos) {
    throw std::logic_error("statement of " + function + " contains " + std::string(kBodyQuote));
  }
  const StatementShape shape = describe_statement(txn, sql);
  if (shape.columns.empty()) {
    throw std::logic_error("statement of " + function + " returns no rows");
  }
  std::vector<std::int64_t> parameters(shape.parameter_types.begin(), shape.parameter_types.end());
  std::vector<std::int64_t> types;
  std::vector<std::int64_t> modifiers;
  for (const StatementShape::Column& column : shape.columns) {
    types.push_back(column.type_oid);
    modifiers.push_back(column.type_modifier);
  }
  const pqxx::row spelled = txn.exec_params1(
      "SELECT array_to_string(ARRAY(SELECT format_type(t, NULL) FROM unnest($1::oid[]) "
      "WITH ORDINALITY AS p(t, n) ORDER BY n), ', '), "
      "array_to_string(ARRAY(SELECT 'c' || n || ' ' || format_type(t, nullif(m, -1)) "
      "FROM unnest($2::oid[], $3::int[]) WITH ORDINALITY AS c(t, m, n) ORDER BY n), ', ')",
      int_array_literal(parameters), int_array_literal(types), int_array_literal(modifiers));
  std::string settings;
  for (const auto& [setting, value] : kPinnedSettings) {
    settings += std::string("\nSET ") + setting + " = " + value;
  }
  // use_column: a name in the statement that is also a column of the result (c1, ...)
  // means the column, never the function's output variable.
  return "CREATE OR REPLACE FUNCTION " + quote_identifier(schema) + "." + function + "(" +
         spelled[0].c_str() + ")\nRETURNS TABLE (" + spelled[1].c_str() +
         ")\nLANGUAGE plpgsql VOLATILE" + settings + "\nAS " + std::string(kBodyQuote) +
         "\n#variable_conflict use_column\nBEGIN\nRETURN QUERY\n" + sql + ";\nEND\n" +
         std::string(kBodyQuote);
}

}  // namespace

const std::vector<PooledFunction>& pooled_functions() {
  static const std::vector<PooledFunction> functions = name_functions();
  return functions;
}

std::string pooled_functions_digest() {
  std::string names;
  for (const PooledFunction& function : pooled_functions()) names += function.name + ",";
  return hex12(fnv1a(names));
}

void apply_pooled_functions(pqxx::dbtransaction& txn, const std::string& schema, bool drop_others) {
  const std::vector<stmt::Statement> statements = stmt::job_statements(quote_identifier(schema));
  std::vector<std::string> names;
  for (const PooledFunction& function : pooled_functions()) {
    txn.exec(create_function(txn, schema, function.name,
                             stmt::statement_named(statements, function.statement).sql));
    names.push_back(function.name);
  }
  if (!drop_others) return;
  const pqxx::result others = txn.exec_params(
      "SELECT format('DROP FUNCTION %I.%I(%s)', n.nspname, p.proname, "
      "pg_get_function_identity_arguments(p.oid)) "
      "FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
      "WHERE n.nspname = $1 AND p.proname LIKE 'pgjobd\\_pooled\\_%' "
      "AND p.proname::text <> ALL ($2::text[])",
      schema, text_array_literal(names));
  for (const auto& drop : others) txn.exec(drop[0].c_str());
}

}  // namespace pgjobd
