#pragma once
// Runs one job: calls its handler, turns an exception into a failure, decides retry or
// dead, records metrics and logs, and hands the outcome to the completer. Never touches
// the database itself.

#include <map>
#include <stop_token>
#include <string>

#include "engine/completer.hpp"
#include "metrics/metrics.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"

namespace pgjobd {

using HandlerTable = std::map<std::string, Handler>;

class JobRunner {
 public:
  JobRunner(const RetryConfig& retry, const HandlerTable& handlers, Completer& completer,
            Metrics& metrics)
      : retry_(retry), handlers_(handlers), completer_(completer), metrics_(metrics) {}

  void run(const Job& job, std::stop_token stop);

 private:
  JobResult call_handler(const Job& job, std::stop_token stop);

  const RetryConfig retry_;
  const HandlerTable& handlers_;
  Completer& completer_;
  Metrics& metrics_;
};

}  // namespace pgjobd
