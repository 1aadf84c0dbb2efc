#pragma once
// Where libpqxx's exceptions become DbError: callers outside src/db/ see only DbError.

#include <string>

namespace pgjobd {

// Call inside a catch block: rethrows the exception in flight as a DbError when it comes
// from libpqxx (the message prefixed with `operation`, any password masked), unchanged
// otherwise.
[[noreturn]] void rethrow_as_db_error(const std::string& operation);

}  // namespace pgjobd
