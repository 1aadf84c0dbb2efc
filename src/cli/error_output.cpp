// Subcommands' error output.

#include "cli/error_output.hpp"

#include <iostream>
#include <string>

#include "db/pqxx_errors.hpp"
#include "log/conninfo_display.hpp"
#include "log/logging.hpp"

namespace pgjobd {

int print_error(std::string_view text, int code) {
  std::cerr << "error: " << one_line_message(text) << "\n";
  return code;
}

int print_db_error(const DbError& error, const DatabaseConfig& database, int code) {
  if (error.connection_lost()) {
    const std::string target = describe_conninfo(database.url);
    const std::string why = mask_password(error.what());
    // A malformed conninfo's error is its description already.
    if (why.find(target) != std::string::npos) return print_error("cannot connect: " + why, code);
    return print_error("cannot connect to " + target + ": " + why, code);
  }
  return print_error(error.what(), code);
}

}  // namespace pgjobd
