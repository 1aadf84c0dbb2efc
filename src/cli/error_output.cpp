// Subcommands' error output.

#include "cli/error_output.hpp"

#include <iostream>
#include <string>

#include "db/pqxx_errors.hpp"
#include "log/logging.hpp"

namespace pgjobd {

int print_error(std::string_view text, int code) {
  std::cerr << "error: " << one_line_message(text) << "\n";
  return code;
}

int print_db_error(const DbError& error, const DatabaseConfig& database, int code) {
  if (error.connection_lost()) {
    return print_error(
        "cannot connect to " + mask_password(database.url) + ": " + mask_password(error.what()),
        code);
  }
  return print_error(error.what(), code);
}

}  // namespace pgjobd
