#pragma once
// How the application gets the dashboard's store without depending on its implementation:
// src/db/pg_ui_store* defines this over PostgreSQL (while that is not merged,
// src/db/pg_ui_store_stub.cpp stands in and throws).

#include <memory>

#include "pgjobd/config.hpp"
#include "ui/ui_store.hpp"

namespace pgjobd::ui {

// A store reading `database` whose every query gives up after `statement_timeout`.
// Throws DbError when it cannot be made.
std::unique_ptr<UiStore> make_pg_ui_store(const DatabaseConfig& database, Millis statement_timeout);

}  // namespace pgjobd::ui
