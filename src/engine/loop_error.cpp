// count_loop_error: the metric and log line of an exception caught at a loop's boundary.

#include "engine/loop_error.hpp"

#include <spdlog/spdlog.h>

#include "metrics/metrics.hpp"
#include "store/db_error.hpp"

namespace pgjobd {

void count_loop_error(Metrics* metrics, const char* loop, const char* operation,
                      const std::exception& error) {
  if (const auto* db_error = dynamic_cast<const DbError*>(&error); db_error != nullptr) {
    if (metrics != nullptr) metrics->db_error(operation, db_error->timed_out());
    return;
  }
  if (metrics != nullptr) metrics->loop_error(loop);
  spdlog::error("{} loop: unexpected error (not a database error), backing off: {}", loop,
                error.what());
}

}  // namespace pgjobd
