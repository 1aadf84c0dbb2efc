#pragma once
// Builds the handler of a job type from its YAML configuration.

#include <string>

#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"

namespace pgjobd {

// Throws std::invalid_argument naming the type when the handler cannot be built.
Handler make_handler(const std::string& type, const HandlerConfig& config);

// The built-in no-op handler (`builtin: noop`): done at once. For benchmarks and smoke tests.
JobResult noop_handler(const Job& job, std::stop_token stop);

}  // namespace pgjobd
