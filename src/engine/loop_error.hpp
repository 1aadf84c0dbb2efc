#pragma once
// What a loop does with an exception caught at the boundary of one pass: a database error
// is expected (an outage), anything else is a bug or a library's own exception. Either way
// the pass is lost, not the daemon: the loop backs off and tries again.

#include <exception>

namespace pgjobd {

class Metrics;

// Counts `error`: a DbError under pgjobd_db_errors_total{operation}; anything else under
// pgjobd_loop_errors_total{loop}, and logged as an error naming the loop (the caller logs
// its own line for both, saying what it retries). `metrics` may be null.
void count_loop_error(Metrics* metrics, const char* loop, const char* operation,
                      const std::exception& error);

}  // namespace pgjobd
