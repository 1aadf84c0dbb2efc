#pragma once
// The one shape of a subcommand's error on stderr: "error: TEXT" and a newline, TEXT on
// one line and free of libpq's decoration, whichever layer the error came from.

#include <string_view>

#include "pgjobd/config.hpp"
#include "store/db_error.hpp"

namespace pgjobd {

// Prints `text` in that shape; returns `code`, the exit code the caller passes on.
int print_error(std::string_view text, int code);

// A database error in that shape: the server's own words, or for a server that cannot be
// reached "cannot connect to URL: why" (the password masked).
int print_db_error(const DbError& error, const DatabaseConfig& database, int code);

}  // namespace pgjobd
