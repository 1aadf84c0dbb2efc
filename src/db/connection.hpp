#pragma once
// Opening PostgreSQL connections. Only files that talk to the database include pqxx.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"

namespace pqxx {
class connection_base;
class dbtransaction;
}  // namespace pqxx
struct pg_result;  // libpq's PGresult

namespace pgjobd {

// pqxx::connection is a typedef in libpqxx 6 and cannot be forward-declared; we hold the
// base class and delete through the concrete type in connection.cpp.
struct ConnectionDeleter {
  void operator()(pqxx::connection_base* conn) const;
};
using ConnectionPtr = std::unique_ptr<pqxx::connection_base, ConnectionDeleter>;

// Opens one connection, tagged application_name = "pgjobd <role>" so operators can tell
// pgjobd's sessions apart in pg_stat_activity. Throws pqxx::broken_connection on failure
// (its message never contains the password).
ConnectionPtr open_connection(const DatabaseConfig& config, const std::string& role);

// Tags an open session with application_name = "pgjobd <role>", as open_connection does:
// for a session handed from one purpose to another. Throws what libpqxx throws.
void name_session(pqxx::connection_base& conn, const DatabaseConfig& config,
                  const std::string& role);

// The session's socket descriptor (-1 when it is not open), for CallDeadline.
int connection_socket(pqxx::connection_base& conn);
// Whether libpq holds the session usable (CONNECTION_OK). libpqxx 6.4's is_open() says only
// that it was opened once.
bool connection_ok(pqxx::connection_base& conn);
// The value libpq uses for connection option `keyword` on this session ("" if none).
std::string connection_option(pqxx::connection_base& conn, const std::string& keyword);

// pg_type OIDs (catalog/pg_type_d.h, which libpq does not install) of the types the daemon
// sends or reads by type.
inline constexpr unsigned int kBoolOid = 16;
inline constexpr unsigned int kInt8Oid = 20;
inline constexpr unsigned int kInt2Oid = 21;
inline constexpr unsigned int kInt4Oid = 23;
inline constexpr unsigned int kOidOid = 26;
inline constexpr unsigned int kJsonOid = 114;
inline constexpr unsigned int kFloat4Oid = 700;
inline constexpr unsigned int kFloat8Oid = 701;
inline constexpr unsigned int kNumericOid = 1700;
inline constexpr unsigned int kJsonbOid = 3802;

// A parameter with its type stated: the server need not infer it, so a statement may
// leave a parameter unused. type_oid is a pg_type OID (kJsonbOid, kInt8Oid).
struct TypedParam {
  unsigned int type_oid;
  std::string value;  // text format
};

struct PgResultDeleter {
  void operator()(pg_result* result) const;  // PQclear
};
using PgResult = std::unique_ptr<pg_result, PgResultDeleter>;

// Runs one statement on `conn` (opened by open_connection), inside whatever transaction
// is open on it, through the extended query protocol: multiple statements are refused by
// the server. Returns its result (rows, if it returned any). Throws the libpqxx exception
// libpqxx itself would (pqxx::sql_error with the SQLSTATE, pqxx::broken_connection).
PgResult exec_typed(pqxx::connection_base& conn, const std::string& sql,
                    const std::vector<TypedParam>& params);

// What the server says one statement takes and gives back, as libpq's describe of an unnamed
// statement tells it: each parameter's type, and each result column's type and modifier
// (pg_type OIDs; no columns for a statement that returns no rows).
struct StatementShape {
  struct Column {
    unsigned int type_oid;
    int type_modifier;
  };
  std::vector<unsigned int> parameter_types;
  std::vector<Column> columns;
};

// Parses `sql` in `txn` as the unnamed statement and describes it without running it.
// Throws as exec_typed does (pqxx::sql_error with the SQLSTATE for SQL the server refuses).
StatementShape describe_statement(pqxx::dbtransaction& txn, const std::string& sql);

}  // namespace pgjobd
