#pragma once
// Builds the handler of a job type from its YAML configuration.

#include <string>

#include "handlers/sql_handler.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"

namespace pgjobd {

// Throws std::invalid_argument naming the type when the handler cannot be built. `sql`
// handlers use `context` (the engine's database and identity).
Handler make_handler(const std::string& type, const HandlerConfig& config,
                     const SqlHandlerContext& context);

// The built-in no-op handler (`builtin: noop`): done at once. For benchmarks and smoke tests.
JobResult noop_handler(const Job& job, const std::stop_token& stop);

}  // namespace pgjobd
