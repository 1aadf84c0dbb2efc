#pragma once
// Turning libpqxx exceptions into DbError, for src/db's own classes: callers outside
// src/db catch DbError only and never need libpqxx headers.

#include <string>
#include <string_view>

#include "pgjobd/duration.hpp"
#include "store/db_error.hpp"

namespace pgjobd {

// Rethrows the exception being handled: a libpqxx one as DbError (passwords masked, the
// message prefixed with "operation: " when one is given), any other as it is. Call it
// only inside a catch block.
[[noreturn]] void rethrow_as_db_error(const std::string& operation = {});

// Throws the DbError of a call abandoned at its deadline (timed_out() and connection_lost()).
[[noreturn]] void throw_call_timed_out(const std::string& operation, Millis bound);

// A libpq message (a DbError's what()) as one line for an operator: without the server's
// severity prefixes ("ERROR:  ", "FATAL:  "), the trailing newline and the continuation
// lines' tabs ("could not connect ...\n\tIs the server running ...").
std::string one_line_message(std::string_view message);

}  // namespace pgjobd
