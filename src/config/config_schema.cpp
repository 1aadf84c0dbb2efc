// The YAML schema: which keys each section allows and which Config field each one sets.
#include <string>
#include <vector>

#include "config/config_stages.hpp"
#include "config/yaml_section.hpp"

namespace pgjobd::config_detail {
namespace {

void read_database(YamlSection s, DatabaseConfig& database) {
  s.read("url", database.url);
  s.read("schema", database.schema);
  s.read("migrate_on_start", database.migrate_on_start);
  s.read("synchronous_claims", database.synchronous_claims);
  s.report_unknown_keys();
}

void read_queues(YamlSection queues, std::map<std::string, QueueConfig>& out) {
  if (!queues.present()) return;  // keep the default {default: {}}
  out.clear();
  for (const YamlSection::Entry& entry : queues.entries()) {
    // "mail:" with nothing under it is a queue with default settings.
    YamlSection queue(entry.value, queues.path_of(entry.key), entry.key_line, queues.diag());
    queue.read("concurrency", out[entry.key].concurrency);
    queue.report_unknown_keys();
  }
}

void read_worker(YamlSection s, WorkerConfig& worker) {
  s.read("concurrency", worker.concurrency);
  read_queues(s.section("queues"), worker.queues);
  s.report_unknown_keys();
}

void read_poll(YamlSection s, PollConfig& poll) {
  s.read("min_interval", poll.min_interval);
  s.read("max_interval", poll.max_interval);
  s.read("listen_notify", poll.listen_notify);
  s.report_unknown_keys();
}

void read_retry(YamlSection s, RetryConfig& retry) {
  s.read("base", retry.base);
  s.read("max_delay", retry.max_delay);
  s.read("jitter", retry.jitter);
  s.report_unknown_keys();
}

void read_lease(YamlSection s, LeaseConfig& lease) {
  s.read("duration", lease.duration);
  s.report_unknown_keys();
}

void read_shutdown(YamlSection s, ShutdownConfig& shutdown) {
  s.read("timeout", shutdown.timeout);
  s.report_unknown_keys();
}

void read_retention(YamlSection s, RetentionConfig& retention) {
  s.read("done", retention.done);
  s.read("dead", retention.dead);
  s.report_unknown_keys();
}

void read_metrics(YamlSection s, MetricsConfig& metrics) {
  s.read("listen", metrics.listen);
  s.report_unknown_keys();
}

void read_log(YamlSection s, LogConfig& log) {
  s.read("level", log.level);
  s.read("format", log.format);
  s.report_unknown_keys();
}

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

void read_handlers(YamlSection handlers, std::map<std::string, HandlerConfig>& out) {
  for (const YamlSection::Entry& entry : handlers.entries()) {
    YamlSection handler(entry.value, handlers.path_of(entry.key), entry.key_line, handlers.diag());
    out[entry.key] = read_handler(std::move(handler));
  }
}

}  // namespace

void read_config(const YAML::Node& root, Config& config, Diagnostics& diag) {
  YamlSection top(root, "", 1, diag);
  read_database(top.section("database"), config.database);
  read_worker(top.section("worker"), config.worker);
  read_poll(top.section("poll"), config.poll);
  read_retry(top.section("retry"), config.retry);
  read_lease(top.section("lease"), config.lease);
  read_shutdown(top.section("shutdown"), config.shutdown);
  read_retention(top.section("retention"), config.retention);
  read_metrics(top.section("metrics"), config.metrics);
  read_log(top.section("log"), config.log);
  read_handlers(top.section("handlers"), config.handlers);
  top.report_unknown_keys();
}

}  // namespace pgjobd::config_detail
