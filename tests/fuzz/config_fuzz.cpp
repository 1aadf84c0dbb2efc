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

#include "fuzz_check.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/duration.hpp"
#include "text/utf8.hpp"

namespace {

using pgjobd::Config;
using pgjobd::ConfigError;
using pgjobd::HandlerConfig;

constexpr const char* kSource = "fuzz.yaml";

// Double-quoted, so that no string (a queue named "yes", a URL with ": ") changes type.
YAML::Emitter& text(YAML::Emitter& out, const std::string& value) {
  return out << YAML::DoubleQuoted << value;
}

void key(YAML::Emitter& out, const char* name) { out << YAML::Key << name << YAML::Value; }

void emit_handler(YAML::Emitter& out, const HandlerConfig& handler) {
  out << YAML::BeginMap;
  switch (handler.kind) {
    case HandlerConfig::Kind::kExec:
      key(out, "exec");
      out << YAML::Flow << YAML::BeginSeq;
      for (const std::string& arg : handler.exec_argv) text(out, arg);
      out << YAML::EndSeq;
      key(out, "permanent_exit_codes");
      out << YAML::Flow << YAML::BeginSeq;
      for (int code : handler.permanent_exit_codes) out << code;
      out << YAML::EndSeq;
      key(out, "kill_grace");
      out << pgjobd::format_duration(handler.kill_grace);
      break;
    case HandlerConfig::Kind::kHttp:
      key(out, "http");
      out << YAML::BeginMap;
      key(out, "url");
      text(out, handler.http_url);
      out << YAML::EndMap;
      break;
    case HandlerConfig::Kind::kSql:
      key(out, "sql");
      text(out, handler.sql);
      break;
    case HandlerConfig::Kind::kBuiltin:
      key(out, "builtin");
      text(out, handler.builtin);
      break;
  }
  key(out, "timeout");
  out << pgjobd::format_duration(handler.timeout);
  out << YAML::EndMap;
}

// Every field of Config, as a config file would write it. A new field must be added here
// too: the round trip below then reports the first input that sets it.
std::string to_yaml(const Config& c) {
  const auto ms = [](pgjobd::Millis d) { return pgjobd::format_duration(d); };
  char jitter[64];
  *std::to_chars(jitter, jitter + sizeof jitter - 1, c.retry.jitter).ptr = '\0';
  YAML::Emitter out;
  out << YAML::BeginMap;
  key(out, "database");
  out << YAML::BeginMap;
  key(out, "url");
  text(out, c.database.url);
  key(out, "schema");
  text(out, c.database.schema);
  key(out, "migrate_on_start");
  out << c.database.migrate_on_start;
  key(out, "synchronous_claims");
  out << c.database.synchronous_claims << YAML::EndMap;
  key(out, "worker");
  out << YAML::BeginMap;
  key(out, "concurrency");
  out << c.worker.concurrency;
  key(out, "queues");
  out << YAML::BeginMap;
  for (const auto& [name, queue] : c.worker.queues) {
    out << YAML::Key;
    text(out, name) << YAML::Value << YAML::BeginMap;
    key(out, "concurrency");
    out << queue.concurrency << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap;
  key(out, "poll");
  out << YAML::BeginMap;
  key(out, "min_interval");
  out << ms(c.poll.min_interval);
  key(out, "max_interval");
  out << ms(c.poll.max_interval);
  key(out, "listen_notify");
  out << c.poll.listen_notify << YAML::EndMap;
  key(out, "retry");
  out << YAML::BeginMap;
  key(out, "base");
  out << ms(c.retry.base);
  key(out, "max_delay");
  out << ms(c.retry.max_delay);
  key(out, "jitter");
  out << jitter << YAML::EndMap;
  key(out, "lease");
  out << YAML::BeginMap;
  key(out, "duration");
  out << ms(c.lease.duration) << YAML::EndMap;
  key(out, "shutdown");
  out << YAML::BeginMap;
  key(out, "timeout");
  out << ms(c.shutdown.timeout) << YAML::EndMap;
  key(out, "retention");
  out << YAML::BeginMap;
  key(out, "done");
  out << ms(c.retention.done);
  key(out, "dead");
  out << ms(c.retention.dead) << YAML::EndMap;
  key(out, "metrics");
  out << YAML::BeginMap;
  key(out, "listen");
  text(out, c.metrics.listen) << YAML::EndMap;
  key(out, "log");
  out << YAML::BeginMap;
  key(out, "level");
  text(out, c.log.level);
  key(out, "format");
  text(out, c.log.format) << YAML::EndMap;
  key(out, "handlers");
  out << YAML::BeginMap;
  for (const auto& [type, handler] : c.handlers) {
    out << YAML::Key;
    text(out, type) << YAML::Value;
    emit_handler(out, handler);
  }
  out << YAML::EndMap << YAML::EndMap;
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
  // U+FFFD: such a file cannot round-trip through the emitter, and says nothing about ours.
  if (pgjobd::valid_utf8(yaml) != yaml) return 0;

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
