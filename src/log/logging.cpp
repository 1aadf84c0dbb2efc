// Logging setup: a text or JSON-lines formatter for spdlog's default logger, plus the
// structured fields (job id, type, ...) that a thread attaches to its log lines.

#include "log/logging.hpp"

#include <spdlog/cfg/env.h>
#include <spdlog/details/fmt_helper.h>
#include <spdlog/formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <regex>

#include "log/log_fields.hpp"
#include "log/secrets.hpp"
#include "text/utf8.hpp"

namespace pgjobd {
namespace {

void append_json_string(std::string& out, std::string_view raw) {
  // Messages and fields can carry a handler's raw bytes; a JSON line must be UTF-8.
  const std::string text = valid_utf8(raw);
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// Text lines: one record is one line, whatever a message or field carries (an error's
// output, a job type name). \n \r \t are written as those escapes, other C0 bytes and DEL
// as \xNN; invalid UTF-8 becomes U+FFFD and valid UTF-8 is kept as is. Backslashes in a
// message stay as they are (paths read better); inside a quoted field they are escaped.
void append_text_escaped(std::string& out, std::string_view raw, bool quoted) {
  for (unsigned char c : valid_utf8(raw)) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += quoted ? "\\\"" : "\"";
        break;
      case '\\':
        out += quoted ? "\\\\" : "\\";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

// logfmt: bare when simple, else double-quoted with escapes, so fields stay parseable.
void append_logfmt_value(std::string& out, std::string_view value) {
  const bool bare = !value.empty() && value.find_first_of(" \"=\\") == std::string_view::npos &&
                    std::none_of(value.begin(), value.end(), is_control);
  if (bare) {
    append_text_escaped(out, value, false);  // still repairs invalid UTF-8
  } else {
    out += '"';
    append_text_escaped(out, value, true);
    out += '"';
  }
}

std::string iso_timestamp(spdlog::log_clock::time_point tp) {
  const auto since_epoch = tp.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - secs);
  std::time_t t = secs.count();
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];  // generous: GCC cannot prove the fields stay 2 digits
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis.count()));
  return buf;
}

// {"ts":"...","level":"info","msg":"...","job_id":1,...}
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line = R"({"ts":")" + iso_timestamp(msg.time) + R"(","level":)";
    const auto level = spdlog::level::to_string_view(msg.level);
    append_json_string(line, std::string_view(level.data(), level.size()));
    line += ",\"msg\":";
    append_json_string(line, scrub_process_secrets({msg.payload.data(), msg.payload.size()}));
    for (const LogField& field : current_log_fields()) {
      line += ',';
      append_json_string(line, field.key);
      line += ':';
      if (field.numeric) {
        line += field.value;
      } else {
        append_json_string(line, scrub_process_secrets(field.value));
      }
    }
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

// 2026-11-29 08:00:00.123 info  job 12 done  job_id=12 type=mail queue=default attempt=1
class TextFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line = iso_timestamp(msg.time);
    line[10] = ' ';
    line.pop_back();  // the Z: terminals read local-looking times, but this is UTC
    line += ' ';
    const auto level = spdlog::level::to_string_view(msg.level);
    line.append(level.data(), level.size());
    line.append(level.size() < 5 ? 6 - level.size() : 1, ' ');
    append_text_escaped(line, scrub_process_secrets({msg.payload.data(), msg.payload.size()}),
                        false);
    for (const LogField& field : current_log_fields()) {
      line += ' ';
      append_text_escaped(line, field.key, false);
      line += '=';
      append_logfmt_value(line, scrub_process_secrets(field.value));
    }
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<TextFormatter>();
  }
};

}  // namespace

std::unique_ptr<spdlog::formatter> make_log_formatter(const std::string& format) {
  if (format == "json") return std::make_unique<JsonFormatter>();
  return std::make_unique<TextFormatter>();
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
