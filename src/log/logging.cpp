// Logging setup: a text or JSON-lines formatter (log_line.cpp) for spdlog's default logger,
// with the structured fields (job id, type, ...) that a thread attaches to its log lines.

#include "log/logging.hpp"

#include <spdlog/cfg/env.h>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <regex>

#include "log/log_fields.hpp"
#include "log/log_line.hpp"
#include "log/secrets.hpp"

namespace pgjobd {
namespace {

// Hands spdlog's record to log_line.cpp with the thread's structured fields, the
// process's secrets (the database password in any spelling) scrubbed from the message and
// every text value: a library's error can quote a connection string.
// The level as log.level spells it: spdlog names warn "warning", and a line should read
// as the config that selects it (and as most tools spell it).
std::string_view level_name(spdlog::level::level_enum level) {
  if (level == spdlog::level::warn) return "warn";
  const auto name = spdlog::level::to_string_view(level);
  return {name.data(), name.size()};
}

std::string scrubbed_line(const spdlog::details::log_msg& msg,
                          std::string (*format)(const LogRecord&)) {
  const std::string_view level = level_name(msg.level);
  const std::string message = scrub_process_secrets({msg.payload.data(), msg.payload.size()});
  std::vector<LogField> fields = current_log_fields();
  for (LogField& field : fields) {
    if (!field.numeric) field.value = scrub_process_secrets(field.value);
  }
  return format({msg.time, level, message, fields});
}

// Writes each record as one line of log_line.cpp's format_json_line or format_text_line:
//   {"ts":"...","level":"info","msg":"...","job_id":1,...}
//   2026-11-29 08:00:00.123 info  job 12 done  job_id=12 type=mail queue=default attempt=1
class LineFormatter final : public spdlog::formatter {
 public:
  explicit LineFormatter(std::string (*format_line)(const LogRecord&))
      : format_line_(format_line) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string line = scrubbed_line(msg, format_line_);
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_line_);
  }

 private:
  std::string (*format_line_)(const LogRecord&);
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_log_formatter(const std::string& format) {
  return std::make_unique<LineFormatter>(format == "json" ? &format_json_line : &format_text_line);
}

void setup_logging(const LogConfig& config) {
  auto logger = spdlog::get("pgjobd");
  if (logger) {
    // A reload: change the existing logger in place. Replacing the default logger would
    // pull it from under threads that are logging through it right now.
    for (auto& sink : logger->sinks()) sink->set_formatter(make_log_formatter(config.format));
  } else {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    sink->set_formatter(make_log_formatter(config.format));
    logger = std::make_shared<spdlog::logger>("pgjobd", sink);
    logger->flush_on(spdlog::level::trace);  // stderr goes to journald/docker: no lag
    spdlog::register_logger(logger);
    spdlog::set_default_logger(logger);
  }
  logger->set_level(spdlog::level::from_str(config.level));
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL wins, for debugging a deployed daemon
}

std::string mask_password(std::string_view conninfo) {
  // URL form: scheme://user:password@host  →  scheme://user:***@host
  static const std::regex url_password(R"(^([a-zA-Z][a-zA-Z0-9+.-]*://[^:@/]*:)[^@]*@)");
  // key=value form: password=secret or password='se cret'
  static const std::regex kv_password(R"((password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*))",
                                      std::regex::icase);
  // URL query parameter: ?password=secret&...
  static const std::regex query_password(R"(([?&]password=)[^&]*)", std::regex::icase);
  // The patterns miss a malformed conninfo's password (an unterminated quote, an '@' in
  // it), and masking first could cut it apart: scrub every spelling of it that the text
  // itself gives, then the process's secrets, then mask what the patterns recognise.
  std::string text =
      scrub_process_secrets(scrub_secrets(conninfo, conninfo_password_candidates(conninfo)));
  text = std::regex_replace(text, url_password, "$1***@");
  text = std::regex_replace(text, query_password, "$1***");
  if (text.find("://") == std::string::npos) {
    text = std::regex_replace(text, kv_password, "$1***");
  }
  return text;
}

}  // namespace pgjobd
