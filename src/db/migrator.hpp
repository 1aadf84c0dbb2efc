#pragma once
// Applying and checking the schema migrations of sql/ and the functions of sql/functions/.

#include <functional>
#include <string>

#include "db/migration_report.hpp"

namespace pqxx {
class connection_base;
}

namespace pgjobd {

// Creates the schema if needed and applies every pending migration, then every function
// and trigger, and the functions of the hot-path statements for sessions behind a pooler
// (pooled_functions.hpp), in one transaction, holding a transaction-level advisory lock so daemons
// that start together serialise (and it also works through PgBouncer in transaction mode).
// The functions are applied after any migration, and when the schema records another
// function digest than this binary's. Idempotent: a schema at this binary's version and
// digest is only read, neither locked nor altered. While another session holds
// the lock it waits, says so after a second (with the holder's pid), and returns with
// `stopped` set, having applied nothing, as soon as stop_requested() (when given) is true.
MigrationReport migrate(pqxx::connection_base& conn, const std::string& schema,
                        const std::function<bool()>& stop_requested = {});

// The digest the migrator records with the functions it applied: sql/functions/'s, and its
// statements' functions' (pooled_functions.hpp).
std::string applied_digest();

// The version recorded in the schema, 0 when it was never migrated. Logs a warning naming
// `pgjobd migrate` when the schema is at this binary's version with another binary's
// functions: not a problem (two binaries of a version may take turns, sql/functions/README.md).
int schema_version(pqxx::connection_base& conn, const std::string& schema);

// Empty when the schema is at this binary's version (whichever binary's functions it
// has); else what is wrong and what to do.
std::string schema_problem(pqxx::connection_base& conn, const std::string& schema);
// The same for a version already read.
std::string schema_problem(int version, const std::string& schema);

}  // namespace pgjobd
