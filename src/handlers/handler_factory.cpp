// Maps each configured handler kind to its implementation.

#include "handlers/handler_factory.hpp"

#include <stdexcept>

#include "handlers/exec_handler.hpp"
#include "handlers/http_handler.hpp"

namespace pgjobd {

JobResult noop_handler(const Job& /*job*/, const std::stop_token& /*stop*/) {
  return JobResult::done();
}

Handler make_handler(const std::string& type, const HandlerConfig& config,
                     const HandlerContext& context) {
  switch (config.kind) {
    case HandlerConfig::Kind::kExec:
      return make_exec_handler(config, context.child_credentials, context.max_result_bytes);
    case HandlerConfig::Kind::kHttp:
      return make_http_handler(config, context.max_result_bytes, context.concurrency);
    case HandlerConfig::Kind::kBuiltin:
      if (config.builtin == "noop") return noop_handler;
      throw std::invalid_argument("handlers." + type + ": unknown builtin '" + config.builtin +
                                  "'");
    case HandlerConfig::Kind::kSql:
      return make_sql_handler(config, context.sql);
  }
  throw std::invalid_argument("handlers." + type + ": unknown handler kind");
}

}  // namespace pgjobd
