#pragma once
// An Engine over a database of the caller's choosing: the unit tests give it a fake, so
// the whole start and drain sequence runs without PostgreSQL. Engine(Config) is this
// with a PgDatabase.

#include <memory>

#include "pgjobd/engine.hpp"
#include "store/database.hpp"

namespace pgjobd {

Engine make_engine(Config config, std::shared_ptr<Database> database);

}  // namespace pgjobd
