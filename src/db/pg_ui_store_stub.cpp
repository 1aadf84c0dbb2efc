// LOCAL GLUE (h-ui-browser working tree only, never committed): the factory over A's
// PgUiStore, so the browser tests run end to end before the lead integrates both branches.
#include "db/pg_ui_store.hpp"
#include "ui/ui_store_factory.hpp"

namespace pgjobd::ui {

std::unique_ptr<UiStore> make_pg_ui_store(const DatabaseConfig& database,
                                          Millis statement_timeout) {
  UiStoreOptions options;
  options.statement_timeout = std::chrono::milliseconds(statement_timeout.count());
  return std::make_unique<PgUiStore>(database, options);
}

}  // namespace pgjobd::ui
