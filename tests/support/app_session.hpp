#pragma once
// A session as an application's, for tests of the SQL interface: the schema is not on its
// search_path, so every call must name it ({s} in a statement stands for the quoted
// schema).

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "db/connection.hpp"
#include "db/sql_text.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {

class Session {
 public:
  explicit Session(TestSchema& schema, const std::string& url = {})
      : schema_(quote_identifier(schema.name())), conn_([&] {
          DatabaseConfig db = schema.config().database;
          if (!url.empty()) db.url = url;
          return open_connection(db, "test");
        }()) {
    pqxx::nontransaction txn(*conn_);
    txn.exec("SET search_path = public");
  }

  // Runs `sql` with {s} replaced by the quoted schema; the first column of the first row.
  std::string query(const std::string& sql) {
    pqxx::nontransaction txn(*conn_);
    const auto rows = txn.exec(expand(sql));
    if (rows.empty() || rows[0][0].is_null()) return "";
    return rows[0][0].c_str();
  }
  std::vector<std::string> column(const std::string& sql) {
    pqxx::nontransaction txn(*conn_);
    std::vector<std::string> out;
    for (const auto& row : txn.exec(expand(sql))) out.emplace_back(row[0].c_str());
    return out;
  }
  // The error `sql` raises: "SQLSTATE message" ("" when it succeeds).
  std::string error(const std::string& sql) {
    try {
      pqxx::nontransaction txn(*conn_);
      txn.exec(expand(sql));
    } catch (const pqxx::insufficient_privilege& e) {
      return std::string("42501 ") + e.what();  // libpqxx leaves this one's sqlstate empty
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate() + " " + e.what();
    }
    return "";
  }
  pqxx::connection_base& connection() { return *conn_; }

 private:
  std::string expand(std::string sql) const {
    for (auto at = sql.find("{s}"); at != std::string::npos; at = sql.find("{s}", at)) {
      sql.replace(at, 3, schema_);
    }
    return sql;
  }
  std::string schema_;
  ConnectionPtr conn_;
};

}  // namespace pgjobd::testing
