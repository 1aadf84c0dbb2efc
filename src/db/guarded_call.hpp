#pragma once
// One call on a store's session: under its deadline (CallDeadline), with every failure
// turned into DbError and the session dropped, to be reopened by the next call (after an
// error its state is unknown, and reconnecting is cheap next to a wedged daemon). The one
// place src/db's stores translate errors.

#include <optional>
#include <string>

#include "db/call_deadline.hpp"
#include "db/connection.hpp"
#include "db/pqxx_errors.hpp"

namespace pgjobd {

// Runs fn() (which uses `session`) with a deadline `bound` from now (0: none; shortenable:
// see CallDeadline). On any
// exception `session` is reset and a DbError thrown: the timeout's when the deadline shut
// the session down, else rethrow_as_db_error's.
template <typename Fn>
auto guarded_call(ConnectionPtr& session, Millis bound, const char* operation, Fn&& fn,
                  bool shortenable = true) {
  std::optional<CallDeadline> deadline;
  if (session) deadline.emplace(*session, bound, shortenable);
  try {
    return fn();
  } catch (...) {
    const bool timed_out = deadline && deadline->expired();
    const Millis armed = deadline ? deadline->bound() : bound;
    deadline.reset();  // disarmed before the session (and its descriptor) is closed
    session.reset();
    if (timed_out) throw_call_timed_out(operation, armed);
    rethrow_as_db_error(operation);
  }
}

}  // namespace pgjobd
