#pragma once
// One log record formatted as one line, text or JSON: the pure part of the formatters that
// logging.cpp installs in spdlog, apart so that tests and the fuzzer can call it directly.

#include <chrono>
#include <span>
#include <string>
#include <string_view>

#include "log/log_fields.hpp"

namespace pgjobd {

struct LogRecord {
  std::chrono::system_clock::time_point time;  // spdlog's log_clock
  std::string_view level;                      // "info", "warn", ... (as log.level spells it)
  std::string_view message;                    // any bytes
  std::span<const LogField> fields;            // keys and values: any bytes
};

// "2026-11-29 08:00:00.123 info  job 12 done  job_id=12 type=mail\n": control characters
// escaped, invalid UTF-8 replaced, fields as logfmt. Always exactly one line.
std::string format_text_line(const LogRecord& record);

// {"ts":"2026-11-29T08:00:00.123Z","level":"info","msg":"...","job_id":12,...} and "\n":
// valid JSON in valid UTF-8, numeric fields unquoted.
std::string format_json_line(const LogRecord& record);

}  // namespace pgjobd
