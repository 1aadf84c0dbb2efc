// SQL handler: a small pool of job stores (connections) running statement + completion.

#include "handlers/sql_handler.hpp"

#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <vector>

namespace pgjobd {
namespace {

// The session broke under the statement: the connection was lost or the server ended it
// (57P01 admin_shutdown: pg_terminate_backend or a fast shutdown; 57P02 crash_shutdown;
// 57P03 cannot_connect_now: still starting up), or its commit is in doubt. Whether the
// statement itself would succeed is unknown.
bool lost_session(const DbError& e) {
  const std::string& state = e.sqlstate();
  return e.connection_lost() || state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02" ||
         state == "57P03";
}

class SqlHandler {
 public:
  SqlHandler(const HandlerConfig& config, SqlHandlerContext context)
      : sql_(config.sql), timeout_(config.timeout), context_(std::move(context)) {}

  JobResult operator()(const Job& job, const std::stop_token& stop) {
    std::unique_ptr<SqlJobStore> store = acquire();
    JobResult result;
    try {
      const bool ours = store->run_and_complete(sql_, job, context_.worker_id, context_.delete_done,
                                                timeout_, context_.max_result_bytes, stop);
      result = ours ? JobResult::done() : JobResult::released();
      result.completion_written = true;  // done committed, or nothing of ours to write
    } catch (const DbError& e) {
      if (stop.stop_requested()) {
        result = JobResult::released();  // a drain or a lost lease cancelled the statement
      } else if (lost_session(e)) {
        // Not the statement's fault: the daemon's own session to the database is gone. No
        // attempt is counted, so an outage cannot make jobs dead.
        spdlog::warn("job {}: the sql handler lost its database session; released: {}", job.id,
                     e.what());
        result = JobResult::released();
      } else if (e.sqlstate().rfind("22", 0) == 0) {
        result = JobResult::dead(e.what());  // the payload does not fit the statement
      } else {
        result = JobResult::retry(e.what());
      }
    }
    release(std::move(store));
    return result;
  }

 private:
  std::unique_ptr<SqlJobStore> acquire() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        auto store = std::move(idle_.back());
        idle_.pop_back();
        return store;
      }
    }
    return context_.database->open_store("sql handler", StoreUse::kOccasional);
  }
  void release(std::unique_ptr<SqlJobStore> store) {
    std::lock_guard lock(mutex_);
    idle_.push_back(std::move(store));  // a failed one reconnects on its next use
  }

  const std::string sql_;
  const Millis timeout_;
  const SqlHandlerContext context_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<SqlJobStore>> idle_;
};

}  // namespace

Handler make_sql_handler(const HandlerConfig& config, const SqlHandlerContext& context) {
  auto handler = std::make_shared<SqlHandler>(config, context);
  return [handler](const Job& job, const std::stop_token& stop) { return (*handler)(job, stop); };
}

}  // namespace pgjobd
