// Fuzzes the config loader with any YAML text. parse_config either returns a Config that
// passes validate_config, or throws ConfigError whose every line names the file; nothing
// else may escape. An accepted Config, written back as YAML, parses to the same Config.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/duration.hpp"
#include "text/utf8.hpp"

namespace {

using pgjobd::Config;
using pgjobd::ConfigError;
using pgjobd::HandlerConfig;
using pgjobd::LimitConfig;
using pgjobd::ScheduleConfig;

constexpr const char* kSource = "fuzz.yaml";

// Double-quoted, so that no string (a queue named "yes", a URL with ": ") changes type.
YAML::Emitter& text(YAML::Emitter& out, const std::string& value) {
  return out << YAML::DoubleQuoted << value;
}

void key(YAML::Emitter& out, const char* name) { out << YAML::Key << name << YAML::Value; }

std::string ms(pgjobd::Millis d) { return pgjobd::format_duration(d); }

void text_list(YAML::Emitter& out, const std::vector<std::string>& values) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const std::string& value : values) text(out, value);
  out << YAML::EndSeq;
}

// Each emitter below names every member of its struct in a structured binding, so that a
// member added to pgjobd/config.hpp stops this file from compiling until it is written
// here too; the round trip then checks that the loader reads it back as it was.

void emit_handler(YAML::Emitter& out, const HandlerConfig& handler) {
  const auto& [kind, argv, exit_codes, http_url, sql, builtin, timeout, kill_grace, dead_letter] =
      handler;
  out << YAML::BeginMap;
  switch (kind) {
    case HandlerConfig::Kind::kExec:
      key(out, "exec");
      text_list(out, argv);
      key(out, "permanent_exit_codes");
      out << YAML::Flow << YAML::BeginSeq;
      for (int code : exit_codes) out << code;
      out << YAML::EndSeq;
      key(out, "kill_grace");
      out << ms(kill_grace);
      break;
    case HandlerConfig::Kind::kHttp:
      key(out, "http");
      out << YAML::BeginMap;
      key(out, "url");
      text(out, http_url);
      out << YAML::EndMap;
      break;
    case HandlerConfig::Kind::kSql:
      key(out, "sql");
      text(out, sql);
      break;
    case HandlerConfig::Kind::kBuiltin:
      key(out, "builtin");
      text(out, builtin);
      break;
  }
  key(out, "timeout");
  out << ms(timeout);
  if (dead_letter) {
    const auto& [dead_type, dead_queue] = *dead_letter;
    key(out, "dead_letter");
    out << YAML::BeginMap;
    key(out, "type");
    text(out, dead_type);
    if (!dead_queue.empty()) {
      key(out, "queue");
      text(out, dead_queue);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

// A schedule's payload is kept as JSON text. JSON is YAML, so yaml-cpp parses it back into
// nodes: quoted strings stay quoted (tag "!"), and null, booleans and numbers are written
// plain, as the loader reads a plain scalar (schedule_section.cpp's scalar_to_json).
void emit_payload(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::Flow << YAML::BeginMap;
      for (const auto& item : node) {
        out << YAML::Key;
        text(out, item.first.Scalar()) << YAML::Value;
        emit_payload(out, item.second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::Flow << YAML::BeginSeq;
      for (const auto& item : node) emit_payload(out, item);
      out << YAML::EndSeq;
      break;
    case YAML::NodeType::Scalar:
      if (node.Tag() == "!") {
        text(out, node.Scalar());
      } else if (node.Scalar() == "true" || node.Scalar() == "false") {
        out << (node.Scalar() == "true");
      } else {
        out << node.Scalar();  // a number, as the file wrote it
      }
      break;
    case YAML::NodeType::Null:  // yaml-cpp's type for a plain `null`
      out << YAML::Null;
      break;
    case YAML::NodeType::Undefined:
      FUZZ_CHECK(!"a payload's JSON text parsed to no node");
  }
}

void emit_schedule(YAML::Emitter& out, const ScheduleConfig& schedule) {
  const auto& [cron, every, timezone, type, queue, priority, max_attempts, payload, enabled,
               overlap, misfire, misfire_grace] = schedule;
  out << YAML::BeginMap;
  if (!cron.empty()) {  // validate_config has let exactly one of cron and every through
    key(out, "cron");
    text(out, cron);
  } else {
    key(out, "every");
    out << ms(every);
  }
  key(out, "timezone");
  text(out, timezone);
  key(out, "type");
  text(out, type);
  key(out, "queue");
  text(out, queue);
  key(out, "priority");
  out << priority;
  key(out, "max_attempts");
  out << max_attempts;
  key(out, "payload");
  emit_payload(out, YAML::Load(payload));
  key(out, "enabled");
  out << enabled;
  key(out, "overlap");
  text(out, overlap);
  key(out, "misfire");
  text(out, misfire);
  key(out, "misfire_grace");
  out << ms(misfire_grace) << YAML::EndMap;
}

void emit_limit(YAML::Emitter& out, const LimitConfig& limit) {
  // rate_per_second is the value of `rate`, which the loader computes again.
  const auto& [types, queues, limit_key, concurrency, rate, rate_per_second, burst] = limit;
  (void)rate_per_second;
  out << YAML::BeginMap;
  key(out, "types");
  text_list(out, types);
  key(out, "queues");
  text_list(out, queues);
  key(out, "key");
  text(out, limit_key);
  key(out, "concurrency");
  out << concurrency;
  if (!rate.empty()) {  // an empty rate is no rate, which only an absent key says
    key(out, "rate");
    text(out, rate);
  }
  key(out, "burst");
  out << burst << YAML::EndMap;
}

void emit_database(YAML::Emitter& out, const pgjobd::DatabaseConfig& database) {
  const auto& [url, schema, migrate_on_start, synchronous_claims, pooler, listen_url,
               call_timeout] = database;
  out << YAML::BeginMap;
  key(out, "url");
  text(out, url);
  key(out, "schema");
  text(out, schema);
  key(out, "migrate_on_start");
  out << migrate_on_start;
  key(out, "synchronous_claims");
  out << synchronous_claims;
  key(out, "pooler");
  text(out, pooler);
  key(out, "listen_url");
  text(out, listen_url);
  key(out, "call_timeout");
  out << ms(call_timeout) << YAML::EndMap;
}

void emit_worker(YAML::Emitter& out, const pgjobd::WorkerConfig& worker) {
  const auto& [concurrency, queues, max_payload_bytes, max_result_bytes, prefetch, notify_finished,
               scheduling] = worker;
  out << YAML::BeginMap;
  key(out, "concurrency");
  out << concurrency;
  key(out, "queues");
  out << YAML::BeginMap;
  for (const auto& [name, queue] : queues) {
    const auto& [queue_concurrency] = queue;
    out << YAML::Key;
    text(out, name) << YAML::Value << YAML::BeginMap;
    key(out, "concurrency");
    out << queue_concurrency << YAML::EndMap;
  }
  out << YAML::EndMap;
  key(out, "max_payload_bytes");
  out << max_payload_bytes;
  key(out, "max_result_bytes");
  out << max_result_bytes;
  key(out, "prefetch");
  out << prefetch;
  key(out, "notify_finished");
  out << notify_finished;
  key(out, "scheduling");
  text(out, scheduling) << YAML::EndMap;
}

void emit_ui(YAML::Emitter& out, const pgjobd::UiConfig& ui) {
  const auto& [listen, show_payloads, refresh, session_ttl, statement_timeout, users] = ui;
  out << YAML::BeginMap;
  key(out, "listen");
  text(out, listen);
  key(out, "show_payloads");
  out << show_payloads;
  key(out, "refresh");
  out << ms(refresh);
  key(out, "session_ttl");
  out << ms(session_ttl);
  key(out, "statement_timeout");
  out << ms(statement_timeout);
  key(out, "users");
  out << YAML::BeginMap;
  for (const auto& [name, user] : users) {
    const auto& [password_hash, role] = user;
    out << YAML::Key;
    text(out, name) << YAML::Value << YAML::BeginMap;
    key(out, "password_hash");
    text(out, password_hash);
    key(out, "role");
    text(out, role) << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap;
}

// Every field of Config, as a config file would write it.
std::string to_yaml(const Config& c) {
  const auto& [database, worker, poll, retry, lease, shutdown, retention, metrics, log, ui,
               handlers, schedules, limits] = c;
  const auto& [min_interval, max_interval, listen_notify] = poll;
  const auto& [base, max_delay, jitter] = retry;
  const auto& [lease_duration] = lease;
  const auto& [shutdown_timeout] = shutdown;
  const auto& [done, dead] = retention;
  const auto& [metrics_listen] = metrics;
  const auto& [level, format] = log;
  char jitter_text[64];
  *std::to_chars(jitter_text, jitter_text + sizeof jitter_text - 1, jitter).ptr = '\0';
  YAML::Emitter out;
  out << YAML::BeginMap;
  key(out, "database");
  emit_database(out, database);
  key(out, "worker");
  emit_worker(out, worker);
  key(out, "poll");
  out << YAML::BeginMap;
  key(out, "min_interval");
  out << ms(min_interval);
  key(out, "max_interval");
  out << ms(max_interval);
  key(out, "listen_notify");
  out << listen_notify << YAML::EndMap;
  key(out, "retry");
  out << YAML::BeginMap;
  key(out, "base");
  out << ms(base);
  key(out, "max_delay");
  out << ms(max_delay);
  key(out, "jitter");
  out << jitter_text << YAML::EndMap;
  key(out, "lease");
  out << YAML::BeginMap;
  key(out, "duration");
  out << ms(lease_duration) << YAML::EndMap;
  key(out, "shutdown");
  out << YAML::BeginMap;
  key(out, "timeout");
  out << ms(shutdown_timeout) << YAML::EndMap;
  key(out, "retention");
  out << YAML::BeginMap;
  key(out, "done");
  out << ms(done);
  key(out, "dead");
  out << ms(dead) << YAML::EndMap;
  key(out, "metrics");
  out << YAML::BeginMap;
  key(out, "listen");
  text(out, metrics_listen) << YAML::EndMap;
  key(out, "log");
  out << YAML::BeginMap;
  key(out, "level");
  text(out, level);
  key(out, "format");
  text(out, format) << YAML::EndMap;
  key(out, "ui");
  emit_ui(out, ui);
  key(out, "handlers");
  out << YAML::BeginMap;
  for (const auto& [type, handler] : handlers) {
    out << YAML::Key;
    text(out, type) << YAML::Value;
    emit_handler(out, handler);
  }
  out << YAML::EndMap;
  if (schedules.has_value()) {  // absent and empty differ (README "Recurring jobs")
    key(out, "schedules");
    out << YAML::BeginMap;
    for (const auto& [name, schedule] : *schedules) {
      out << YAML::Key;
      text(out, name) << YAML::Value;
      emit_schedule(out, schedule);
    }
    out << YAML::EndMap;
  }
  if (limits.has_value()) {  // absent and empty differ (README "Limits")
    key(out, "limits");
    out << YAML::BeginMap;
    for (const auto& [name, limit] : *limits) {
      out << YAML::Key;
      text(out, name) << YAML::Value;
      emit_limit(out, limit);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  FUZZ_CHECK(out.good());
  return out.c_str();
}

bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

// Every problem is one line "fuzz.yaml[:LINE]: ..." without control characters, whatever
// the file quoted into it, and what() lists them all.
void check_error(const ConfigError& e) {
  FUZZ_CHECK(!e.problems().empty());
  std::string joined;
  for (const std::string& problem : e.problems()) {
    FUZZ_CHECK(problem.starts_with(std::string(kSource) + ":"));
    FUZZ_CHECK(std::none_of(problem.begin(), problem.end(), is_control));
    joined += (joined.empty() ? "" : "\n") + problem;
  }
  FUZZ_CHECK(joined == e.what());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  Config config;
  try {
    config = pgjobd::parse_config(yaml, kSource);
  } catch (const ConfigError& e) {
    check_error(e);
    return 0;
  }  // any other exception escapes: libFuzzer reports it as a crash
  pgjobd::validate_config(config, kSource);  // parse_config let it through: so must this

  // yaml-cpp's parser keeps invalid UTF-8 bytes in a scalar, its emitter writes them as
  // U+FFFD, and a NUL byte too (found by this fuzzer: a plain scalar holding one): such a
  // file cannot round-trip through the emitter, and says nothing about ours.
  if (pgjobd::valid_utf8(yaml) != yaml || yaml.find('\0') != std::string::npos) return 0;

  const std::string written = to_yaml(config);
  Config reread;
  try {
    reread = pgjobd::parse_config(written, kSource);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "written back:\n%s\nrejected: %s\n", written.c_str(), e.what());
    FUZZ_CHECK(!"the written-back config was rejected");
  }
  if (!(reread == config)) std::fprintf(stderr, "written back:\n%s\n", written.c_str());
  FUZZ_CHECK(reread == config);
  return 0;
}
