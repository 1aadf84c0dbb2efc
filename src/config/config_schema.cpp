// Reads a YAML tree into a Config by the key table, and the two maps of names it cannot read
// generically: worker.queues and the handlers with their kind-dependent keys.
#include <string>
#include <vector>

#include "config/config_keys.hpp"
#include "config/config_stages.hpp"
#include "config/yaml_section.hpp"

namespace pgjobd::config_detail {
namespace {

struct KindKey {
  const char* key;
  HandlerConfig::Kind kind;
};

constexpr KindKey kKinds[] = {
    {"exec", HandlerConfig::Kind::kExec},
    {"http", HandlerConfig::Kind::kHttp},
    {"sql", HandlerConfig::Kind::kSql},
    {"builtin", HandlerConfig::Kind::kBuiltin},
};

void read_http(YamlSection& handler, HandlerConfig& config) {
  const YamlSection::Entry* entry = handler.find("http");
  if (entry == nullptr) return;
  if (entry->value.IsScalar()) {  // a likely slip, worth a precise hint
    handler.diag().add(line_of(entry->value, entry->key_line), handler.path_of("http"),
                       "expected a map, write http: {url: " + entry->value.Scalar() + "}");
    return;
  }
  YamlSection http = handler.section("http");
  if (http.is_map() && http.find("url") == nullptr) {
    http.diag().add(http.line(), http.path(), "missing url (the URL the payload is POSTed to)");
  }
  http.read("url", config.http_url);
  http.report_unknown_keys();
}

void read_dead_letter(YamlSection& handler, HandlerConfig& config) {
  if (handler.find("dead_letter") == nullptr) return;
  YamlSection dead_letter = handler.section("dead_letter");
  if (!dead_letter.is_map()) return;  // already reported
  if (dead_letter.find("type") == nullptr) {
    dead_letter.diag().add(dead_letter.line(), dead_letter.path_of("type"),
                           "missing (the job type a dead job of this type enqueues)");
  }
  DeadLetterConfig& out = config.dead_letter.emplace();
  dead_letter.read("type", out.type);
  if (dead_letter.find("queue") != nullptr) {
    dead_letter.read("queue", out.queue);
    // Given but empty ("queue: ''") is a slip, not "the dead job's queue": refused.
    if (out.queue.empty()) {
      dead_letter.diag().add(dead_letter.line(), dead_letter.path_of("queue"),
                             "must not be empty (leave it out for the dead job's queue)");
    }
  }
  dead_letter.report_unknown_keys();
}

HandlerConfig read_handler(YamlSection handler) {
  HandlerConfig config;
  std::vector<std::string> kinds;
  for (const KindKey& kind : kKinds) {
    if (handler.find(kind.key) != nullptr) {
      if (kinds.empty()) config.kind = kind.kind;
      kinds.emplace_back(kind.key);
    }
  }
  if (!handler.is_map()) return config;  // already reported
  if (kinds.empty()) {
    handler.diag().add(handler.line(), handler.path(),
                       "no handler kind: give exactly one of exec, http, sql or builtin");
  } else if (kinds.size() > 1) {
    std::string both = kinds[0];
    for (std::size_t i = 1; i < kinds.size(); ++i) both += " and " + kinds[i];
    handler.diag().add(handler.line(), handler.path(),
                       "has both " + both + ": give exactly one of exec, http, sql or builtin");
  }
  handler.read("exec", config.exec_argv);
  read_http(handler, config);
  handler.read("sql", config.sql);
  handler.read("builtin", config.builtin);
  handler.read("timeout", config.timeout);
  read_dead_letter(handler, config);
  bool is_exec = config.kind == HandlerConfig::Kind::kExec && !kinds.empty();
  for (const char* key : {"permanent_exit_codes", "kill_grace"}) {
    const YamlSection::Entry* entry = handler.find(key);
    if (entry != nullptr && !is_exec) {
      handler.diag().add(entry->key_line, handler.path_of(key), "only valid with exec");
    }
  }
  if (is_exec) {
    handler.read("permanent_exit_codes", config.permanent_exit_codes);
    handler.read("kill_grace", config.kill_grace);
  }
  handler.report_unknown_keys();
  return config;
}

}  // namespace

void read_queues(YamlSection& worker, std::string_view key, Config& config) {
  YamlSection queues = worker.section(key);
  if (!queues.present()) return;  // keep the default {default: {}}
  std::map<std::string, QueueConfig>& out = config.worker.queues;
  out.clear();
  for (const YamlSection::Entry& entry : queues.entries()) {
    // "mail:" with nothing under it is a queue with default settings.
    YamlSection queue(entry.value, queues.path_of(entry.key), entry.key_line, queues.diag());
    queue.read("concurrency", out[entry.key].concurrency);
    queue.report_unknown_keys();
  }
}

void read_ui_users(YamlSection& ui, std::string_view key, Config& config) {
  YamlSection users = ui.section(key);
  if (!users.present()) return;
  for (const YamlSection::Entry& entry : users.entries()) {
    YamlSection user(entry.value, users.path_of(entry.key), entry.key_line, users.diag());
    UiUserConfig& out = config.ui.users[entry.key];
    if (user.is_map() && user.find("password_hash") == nullptr) {
      user.diag().add(user.line(), user.path_of("password_hash"),
                      "missing (make one with `pgjobd ui-passwd`)");
    }
    if (user.is_map() && user.find("role") == nullptr) {
      user.diag().add(user.line(), user.path_of("role"), "missing (operator or read_only)");
    }
    user.read("password_hash", out.password_hash);
    user.read("role", out.role);
    user.report_unknown_keys();
  }
}

void read_handlers(YamlSection& handlers, std::string_view /*key: TYPE*/, Config& config) {
  for (const YamlSection::Entry& entry : handlers.entries()) {
    YamlSection handler(entry.value, handlers.path_of(entry.key), entry.key_line, handlers.diag());
    config.handlers[entry.key] = read_handler(std::move(handler));
  }
}

void read_config(const YAML::Node& root, Config& config, Diagnostics& diag) {
  YamlSection top(root, "", 1, diag);
  for (std::string_view name : config_sections()) {
    YamlSection section = top.section(name);
    for (const ConfigKey& key : config_keys()) {
      if (key.read != nullptr && section_of(key.name) == name) {
        key.read(section, below_section(key.name), config);
      }
    }
    section.report_unknown_keys();
  }
  top.report_unknown_keys();
}

}  // namespace pgjobd::config_detail
