#pragma once
// How the application gets the dashboard's store without depending on its implementation:
// src/db/ui/pg_ui_store_factory.cpp defines this over PostgreSQL (PgUiStore).

#include <memory>

#include "pgjobd/config.hpp"
#include "ui/ui_store.hpp"

namespace pgjobd::ui {

// A store reading `database` whose every query gives up after `statement_timeout`.
// `pgjobd run` makes it before the engine waits for the database, so it should connect on
// first use (and reconnect after a failure, each method throwing DbError meanwhile) rather
// than need the server now: a throw here stops the daemon from starting.
std::unique_ptr<UiStore> make_pg_ui_store(const DatabaseConfig& database, Millis statement_timeout);

}  // namespace pgjobd::ui
