// The dashboard's store for the application (src/ui/ui_store_factory.hpp): PgUiStore, which
// connects on first use, so a dashboard made before the database is up does not stop the
// daemon from starting.
#include <chrono>

#include "db/ui/pg_ui_store.hpp"
#include "ui/ui_store_factory.hpp"

namespace pgjobd::ui {

std::unique_ptr<UiStore> make_pg_ui_store(const DatabaseConfig& database,
                                          Millis statement_timeout) {
  pgjobd::UiStoreOptions options;
  options.statement_timeout = std::chrono::milliseconds(statement_timeout.count());
  return std::make_unique<pgjobd::PgUiStore>(database, options);
}

}  // namespace pgjobd::ui
