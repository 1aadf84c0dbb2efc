// TEMPORARY stand-in for the PostgreSQL dashboard store (src/db/pg_ui_store.{hpp,cpp},
// built on another branch): it lets the web layer link until that store is merged, at which
// point this file is deleted and make_pg_ui_store constructs PgUiStore.
#include "store/db_error.hpp"
#include "ui/ui_store_factory.hpp"

namespace pgjobd::ui {

std::unique_ptr<UiStore> make_pg_ui_store(const DatabaseConfig& /*database*/,
                                          Millis /*statement_timeout*/) {
  throw DbError("dashboard store not built", "", false);
}

}  // namespace pgjobd::ui
