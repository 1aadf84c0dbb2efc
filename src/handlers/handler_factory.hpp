#pragma once
// Builds the handler of a job type from its YAML configuration.

#include <cstddef>
#include <string>

#include "handlers/exec_environment.hpp"
#include "handlers/sql_handler.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"

namespace pgjobd {

// What handlers need from the engine besides their own config.
struct HandlerContext {
  SqlHandlerContext sql;                  // sql handlers: the engine's database and identity
  WithheldCredentials child_credentials;  // exec handlers: kept out of the child's environment
  // exec and http handlers keep at most this (+ 1) of their output for the result:
  // worker.max_result_bytes (0: none).
  std::size_t max_result_bytes = 0;
  // http handlers: worker.concurrency, the most requests they have in flight at once.
  int concurrency = 1;
};

// Throws std::invalid_argument naming the type when the handler cannot be built.
Handler make_handler(const std::string& type, const HandlerConfig& config,
                     const HandlerContext& context);

// The built-in no-op handler (`builtin: noop`): done at once. For benchmarks and smoke tests.
JobResult noop_handler(const Job& job, const std::stop_token& stop);

}  // namespace pgjobd
