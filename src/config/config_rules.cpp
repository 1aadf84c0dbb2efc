// The rules a Config must satisfy beyond its YAML types: ranges, names and cross-field limits.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <string_view>

#include "config/config_stages.hpp"
#include "schedule/capacity.hpp"
#include "schedule/cron_expression.hpp"
#include "schedule/tick_calculator.hpp"
#include "text/escape.hpp"
#include "text/sql_statements.hpp"

namespace pgjobd::config_detail {
namespace {

constexpr int kMaxConcurrency = 10'000;
// The jobs table's constraints allow 200 characters (jobs_queue_length, jobs_type_length);
// 200 bytes of a queue name are never more.
constexpr std::size_t kMaxQueueNameBytes = 200;
constexpr std::size_t kMaxTypeNameCharacters = 200;

// Characters of UTF-8 text as PostgreSQL counts them: every byte but continuation bytes.
std::size_t utf8_characters(std::string_view text) {
  std::size_t count = 0;
  for (const char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
  }
  return count;
}
constexpr int kMinPayloadLimit = 1024;
constexpr int kMaxPayloadLimit = (1 << 30) - 1;
// A result of concurrency × this is held in memory at once, and a batch of completions
// carries up to 1,000 of them.
constexpr int kMaxResultLimit = 16 * 1024 * 1024;
constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};

// Reports problems unless a key the rule depends on already has one: a bad
// poll.max_interval should not also produce "min_interval exceeds max_interval".
class Rules {
 public:
  explicit Rules(Diagnostics& diag) : diag_(diag) {}

  // Reports `what` against `key` unless `ok`. `other` names a second key the rule reads; the
  // problem is placed on whichever of the two was written in the file.
  void require(bool ok, const std::string& key, const std::string& what,
               const std::string& other = "") {
    if (ok || diag_.reported(key) || (!other.empty() && diag_.reported(other))) return;
    bool use_other = !other.empty() && diag_.line_of(key) == 0 && diag_.line_of(other) != 0;
    diag_.add(use_other ? other : key, what);
  }

 private:
  Diagnostics& diag_;
};

// The schema reaches SQL as a quoted identifier; PostgreSQL truncates names at 63 bytes.
bool is_plain_identifier(std::string_view name) {
  auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  return !name.empty() && name.size() <= 63 &&
         std::isdigit(static_cast<unsigned char>(name.front())) == 0 &&
         std::all_of(name.begin(), name.end(),
                     [&](char c) { return static_cast<unsigned char>(c) < 0x80 && word_char(c); });
}

// What is wrong with a metrics.listen value, or "" if it is usable ("" disables the endpoint).
std::string listen_problem(std::string_view listen) {
  if (listen.empty()) return {};
  std::string_view::size_type colon = listen.rfind(':');
  if (colon == std::string_view::npos || listen.find(' ') != std::string_view::npos) {
    return "expected host:port such as 127.0.0.1:9464, got " + single_quoted(listen);
  }
  std::string_view host = listen.substr(0, colon);
  std::string_view port = listen.substr(colon + 1);
  if (host.empty())
    return "missing host in " + single_quoted(listen) + " (0.0.0.0:PORT listens everywhere)";
  if (host.find(':') != std::string_view::npos && !(host.front() == '[' && host.back() == ']')) {
    return "write an IPv6 host in brackets, e.g. [::1]:9464, not " + single_quoted(listen);
  }
  bool digits =
      !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      });
  if (!digits || std::stoi(std::string(port)) > 65535) {
    return "port must be a number from 0 to 65535, got " + single_quoted(port);
  }
  return {};
}

void check_database(const DatabaseConfig& database, Rules& rules) {
  rules.require(!database.url.empty(), "database.url", "must not be empty");
  rules.require(is_plain_identifier(database.schema), "database.schema",
                single_quoted(database.schema) +
                    " is not a plain identifier (letters, digits and _, not starting with a "
                    "digit, at most 63 bytes)");
  rules.require(database.pooler == "none" || database.pooler == "transaction", "database.pooler",
                "unknown pooler " + single_quoted(database.pooler) +
                    " (use none, or transaction for a transaction-pooling PgBouncer)");
}

void check_worker(const WorkerConfig& worker, Rules& rules) {
  rules.require(worker.concurrency >= 1 && worker.concurrency <= kMaxConcurrency,
                "worker.concurrency",
                "must be from 1 to " + std::to_string(kMaxConcurrency) + ", got " +
                    std::to_string(worker.concurrency));
  rules.require(
      worker.max_payload_bytes >= kMinPayloadLimit && worker.max_payload_bytes <= kMaxPayloadLimit,
      "worker.max_payload_bytes",
      "must be from " + std::to_string(kMinPayloadLimit) + " to " +
          std::to_string(kMaxPayloadLimit) + " (PostgreSQL's largest text), got " +
          std::to_string(worker.max_payload_bytes));
  rules.require(worker.max_result_bytes >= 0 && worker.max_result_bytes <= kMaxResultLimit,
                "worker.max_result_bytes",
                "must be from 0 to " + std::to_string(kMaxResultLimit) + ", got " +
                    std::to_string(worker.max_result_bytes));
  rules.require(worker.prefetch >= 0 && worker.prefetch <= kMaxConcurrency, "worker.prefetch",
                "must be from 0 to " + std::to_string(kMaxConcurrency) + ", got " +
                    std::to_string(worker.prefetch));
  rules.require(worker.scheduling == "batch" || worker.scheduling == "normal", "worker.scheduling",
                "unknown policy " + single_quoted(worker.scheduling) +
                    " (use batch, or normal to keep the policy the daemon was started with)");
  rules.require(!worker.queues.empty(), "worker.queues", "serve at least one queue");
  for (const auto& [name, queue] : worker.queues) {
    std::string key = "worker.queues." + name;
    rules.require(!name.empty(), key, "a queue name must not be empty");
    rules.require(name.size() <= kMaxQueueNameBytes, key,
                  "queue name is " + std::to_string(name.size()) + " bytes, at most " +
                      std::to_string(kMaxQueueNameBytes) + " are allowed");
    rules.require(
        queue.concurrency >= 0 && queue.concurrency <= worker.concurrency, key + ".concurrency",
        "must be from 0 (no limit of its own) to worker.concurrency (" +
            std::to_string(worker.concurrency) + "), got " + std::to_string(queue.concurrency),
        "worker.concurrency");
  }
}

void check_timing(const Config& config, Rules& rules) {
  const PollConfig& poll = config.poll;
  rules.require(poll.min_interval > Millis(0), "poll.min_interval", "must be more than 0");
  rules.require(poll.min_interval <= poll.max_interval, "poll.min_interval",
                "poll.min_interval (" + format_duration(poll.min_interval) +
                    ") must not exceed poll.max_interval (" + format_duration(poll.max_interval) +
                    ")",
                "poll.max_interval");
  const RetryConfig& retry = config.retry;
  rules.require(retry.base > Millis(0), "retry.base", "must be more than 0");
  rules.require(retry.max_delay >= retry.base, "retry.max_delay",
                "retry.max_delay (" + format_duration(retry.max_delay) +
                    ") must be at least retry.base (" + format_duration(retry.base) + ")",
                "retry.base");
  // NaN fails both comparisons, so it is reported too.
  rules.require(retry.jitter >= 0 && retry.jitter <= 1, "retry.jitter",
                "must be from 0 to 1, got " + std::to_string(retry.jitter));
  // Shorter leases expire between heartbeats and get running jobs rescued twice.
  rules.require(config.lease.duration >= Millis(1000), "lease.duration",
                "must be at least 1s, got " + format_duration(config.lease.duration));
  // The parser never yields negative durations; configs built in code might.
  rules.require(config.shutdown.timeout >= Millis(0), "shutdown.timeout", "must not be negative");
  rules.require(config.retention.done >= Millis(0), "retention.done", "must not be negative");
  rules.require(config.retention.dead >= Millis(0), "retention.dead", "must not be negative");
}

void check_output(const Config& config, Rules& rules) {
  const std::string& level = config.log.level;
  rules.require(std::find(kLogLevels.begin(), kLogLevels.end(), level) != kLogLevels.end(),
                "log.level",
                "unknown level " + single_quoted(level) +
                    " (use trace, debug, info, warn, error, critical or off)");
  rules.require(config.log.format == "text" || config.log.format == "json", "log.format",
                "unknown format " + single_quoted(config.log.format) + " (use text or json)");
  std::string listen = listen_problem(config.metrics.listen);
  rules.require(listen.empty(), "metrics.listen", listen);
}

void check_handler(const std::string& type, const HandlerConfig& handler, Rules& rules) {
  using Kind = HandlerConfig::Kind;
  std::string key = "handlers." + type;
  rules.require(!type.empty(), key, "a job type must not be empty");
  // The jobs table refuses longer types (constraint jobs_type_length).
  const std::size_t characters = utf8_characters(type);
  rules.require(characters <= kMaxTypeNameCharacters, key,
                "job type is " + std::to_string(characters) + " characters, at most " +
                    std::to_string(kMaxTypeNameCharacters) + " are allowed");
  switch (handler.kind) {
    case Kind::kExec:
      rules.require(!handler.exec_argv.empty(), key + ".exec",
                    "must list the program and its arguments (no shell)");
      rules.require(handler.exec_argv.empty() || !handler.exec_argv[0].empty(), key + ".exec[0]",
                    "the program must not be empty");
      break;
    case Kind::kHttp: {
      std::string_view url = handler.http_url;
      rules.require(url.starts_with("http://") || url.starts_with("https://"), key + ".http.url",
                    "must start with http:// or https://, got " + single_quoted(url));
      break;
    }
    case Kind::kSql: {
      // The statement runs through the extended protocol, which takes exactly one; a second
      // one (`...; COMMIT; ...`) is refused here, with where the first one ends.
      const SqlStatementCount count = count_sql_statements(handler.sql);
      rules.require(
          count.statements > 0, key + ".sql",
          handler.sql.empty() ? "must not be empty" : "holds no statement (only comments or ';')");
      std::string where;
      if (count.first_separator) {
        where = " (found ';' at line " + std::to_string(count.first_separator->line) + " column " +
                std::to_string(count.first_separator->column) + ")";
      }
      rules.require(count.statements <= 1, key + ".sql",
                    "holds " + std::to_string(count.statements) +
                        " statements; a handler runs exactly one" + where);
      break;
    }
    case Kind::kBuiltin:
      rules.require(handler.builtin == "noop", key + ".builtin",
                    "unknown builtin " + single_quoted(handler.builtin) + " (known: noop)");
      break;
  }
  rules.require(handler.kind == Kind::kExec || handler.permanent_exit_codes.empty(),
                key + ".permanent_exit_codes", "only valid with exec");
  for (std::size_t i = 0; i < handler.permanent_exit_codes.size(); ++i) {
    int code = handler.permanent_exit_codes[i];
    rules.require(code >= 1 && code <= 255,
                  key + ".permanent_exit_codes[" + std::to_string(i) + "]",
                  "exit code " + std::to_string(code) + " is outside 1..255");
  }
  rules.require(handler.timeout >= Millis(0), key + ".timeout", "must not be negative");
  rules.require(handler.kill_grace >= Millis(0), key + ".kill_grace", "must not be negative");
  // A handler may name its own type: a dead-letter job that dies enqueues nothing (the
  // trigger skips rows with dead_letter_of set), so there is no loop to refuse.
  if (handler.dead_letter) {
    const DeadLetterConfig& dead_letter = *handler.dead_letter;
    const std::size_t target = utf8_characters(dead_letter.type);
    rules.require(!dead_letter.type.empty(), key + ".dead_letter.type",
                  "a job type must not be empty");
    rules.require(target <= kMaxTypeNameCharacters, key + ".dead_letter.type",
                  "job type is " + std::to_string(target) + " characters, at most " +
                      std::to_string(kMaxTypeNameCharacters) + " are allowed");
    rules.require(dead_letter.queue.size() <= kMaxQueueNameBytes, key + ".dead_letter.queue",
                  "queue name is " + std::to_string(dead_letter.queue.size()) + " bytes, at most " +
                      std::to_string(kMaxQueueNameBytes) + " are allowed");
  }
}

// Schedule names reach metric labels, log lines and the jobs' unique_key: kept plain.
bool is_schedule_name(std::string_view name) {
  return !name.empty() && name.size() <= 100 && std::all_of(name.begin(), name.end(), [](char c) {
    return (static_cast<unsigned char>(c) < 0x80 && std::isalnum(static_cast<unsigned char>(c))) ||
           c == '_' || c == '-' || c == '.';
  });
}

// What is wrong with `call()`'s argument: the exception's text, or "" when it is fine.
template <typename F>
std::string problem_of(F call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

void check_schedule(const std::string& name, const ScheduleConfig& schedule, Rules& rules) {
  std::string key = "schedules." + name;
  rules.require(is_schedule_name(name), key,
                "a schedule name is 1 to 100 letters, digits, _, - or . (it names the jobs' "
                "unique_key and a metric label)");
  bool has_cron = !schedule.cron.empty();
  bool has_every = schedule.every != Millis(0);
  rules.require(has_cron != has_every, key,
                has_cron ? "has both cron and every: give exactly one"
                         : "no timing: give exactly one of cron or every");
  if (has_cron) {
    rules.require(problem_of([&] { schedule::parse_cron(schedule.cron); }).empty(), key + ".cron",
                  problem_of([&] { schedule::parse_cron(schedule.cron); }));
  }
  if (has_every) {
    rules.require(schedule.every >= Millis(1000) && schedule.every.count() % 1000 == 0,
                  key + ".every",
                  "must be whole seconds, at least 1s, got " + format_duration(schedule.every));
  }
  rules.require(problem_of([&] { schedule::check_time_zone(schedule.timezone); }).empty(),
                key + ".timezone",
                problem_of([&] { schedule::check_time_zone(schedule.timezone); }));
  rules.require(!schedule.type.empty(), key + ".type",
                "missing type (the job type each tick inserts)", key);
  rules.require(
      utf8_characters(schedule.type) <= kMaxTypeNameCharacters, key + ".type",
      "job type is longer than " + std::to_string(kMaxTypeNameCharacters) + " characters");
  rules.require(!schedule.queue.empty() && schedule.queue.size() <= kMaxQueueNameBytes,
                key + ".queue",
                "a queue name is 1 to " + std::to_string(kMaxQueueNameBytes) + " bytes");
  rules.require(schedule.priority >= -32768 && schedule.priority <= 32767, key + ".priority",
                "must be from -32768 to 32767, got " + std::to_string(schedule.priority));
  rules.require(schedule.max_attempts >= 1, key + ".max_attempts",
                "must be at least 1, got " + std::to_string(schedule.max_attempts));
  rules.require(schedule.overlap == "allow" || schedule.overlap == "skip", key + ".overlap",
                "unknown overlap " + single_quoted(schedule.overlap) + " (use allow or skip)");
  rules.require(
      schedule.misfire == "skip" || schedule.misfire == "all" || schedule.misfire == "none",
      key + ".misfire",
      "unknown misfire " + single_quoted(schedule.misfire) + " (use skip, all or none)");
  rules.require(schedule.misfire_grace >= Millis(0), key + ".misfire_grace",
                "must not be negative");
}

// Beyond the scheduler's capacity ticks are missed on every pass: refused, naming both rates.
void check_schedule_load(const std::map<std::string, ScheduleConfig>& schedules, Rules& rules) {
  double asked = 0;
  for (const auto& [name, schedule] : schedules) {
    if (!schedule.enabled) continue;
    asked += schedule::peak_ticks_per_second(
        schedule.cron, std::chrono::duration_cast<std::chrono::seconds>(schedule.every).count());
  }
  rules.require(asked <= schedule::kTicksPerSecondCapacity, "schedules",
                "ask for up to " + std::to_string(static_cast<long long>(std::ceil(asked))) +
                    " ticks per second; the scheduler fires about " +
                    std::to_string(static_cast<long long>(schedule::kTicksPerSecondCapacity)) +
                    " per second (more daemons do not add to it) and would miss the rest: use "
                    "longer intervals (README \"Recurring jobs\")");
}

// A limit's name is written into the database and shown in metrics labels.
void check_limit(const std::string& name, const LimitConfig& limit, Rules& rules) {
  const std::string key = "limits." + name;
  rules.require(is_schedule_name(name), key,
                "a limit name is 1 to 100 letters, digits, _, - or . (it labels metrics)");
  rules.require(!limit.types.empty() || !limit.queues.empty(), key,
                "matches every job: give types, queues or both");
  rules.require(limit.concurrency != 0 || limit.rate_per_second > 0, key,
                "limits nothing: give concurrency, rate or both");
  rules.require(limit.concurrency >= 0 && limit.concurrency <= 100'000, key + ".concurrency",
                "must be from 1 to 100000, got " + std::to_string(limit.concurrency));
  rules.require(limit.burst >= 1 && limit.burst <= 1'000'000, key + ".burst",
                "must be from 1 to 1000000, got " + std::to_string(limit.burst));
  rules.require(limit.burst == 1 || limit.rate_per_second > 0, key + ".burst",
                "only valid with rate");
  for (const std::string& type : limit.types) {
    rules.require(!type.empty() && utf8_characters(type) <= kMaxTypeNameCharacters, key + ".types",
                  "a job type is 1 to 200 characters, got '" + type + "'");
  }
  for (const std::string& queue : limit.queues) {
    rules.require(!queue.empty() && queue.size() <= kMaxQueueNameBytes, key + ".queues",
                  "a queue name is 1 to 200 bytes, got '" + queue + "'");
  }
  // A payload field name: any text would do for PostgreSQL (payload -> $n), but a name
  // that cannot be a simple JSON key is far more likely a slip.
  rules.require(limit.key.size() <= 200 &&
                    std::none_of(limit.key.begin(), limit.key.end(),
                                 [](char c) { return static_cast<unsigned char>(c) < 0x20; }),
                key + ".key",
                "a payload field name of at most 200 bytes, without control characters");
}

// 127.0.0.0/8, ::1 and localhost: only this machine can connect, so a dashboard there may
// go without users (anyone who can reach it can reach the database's own port too).
bool is_loopback_host(std::string_view host) {
  return host == "localhost" || host == "[::1]" || host.starts_with("127.");
}

// What crypt(3) writes: "$id$" (yescrypt "$y$", bcrypt "$2b$", sha512crypt "$6$", ...) then
// the setting and hash in its alphabet. Checked here so that a password pasted in place of
// its hash is refused at start rather than turning every login away.
bool is_crypt_hash(std::string_view hash) {
  if (hash.size() < 10 || hash.front() != '$') return false;
  if (std::count(hash.begin(), hash.end(), '$') < 3) return false;
  return std::all_of(hash.begin(), hash.end(), [](char c) {
    return (static_cast<unsigned char>(c) < 0x80 && std::isalnum(static_cast<unsigned char>(c))) ||
           c == '.' || c == '/' || c == '$' || c == '=' || c == ',' || c == '-';
  });
}

bool is_user_name(std::string_view name) {
  return !name.empty() && name.size() <= 100 && std::all_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
  });
}

void check_ui(const UiConfig& ui, Rules& rules) {
  std::string listen = listen_problem(ui.listen);
  rules.require(listen.empty(), "ui.listen", listen);
  if (listen.empty() && !ui.listen.empty()) {
    std::string_view host = std::string_view(ui.listen).substr(0, ui.listen.rfind(':'));
    rules.require(!ui.users.empty() || is_loopback_host(host), "ui.users",
                  "the dashboard listens on " + single_quoted(ui.listen) +
                      ", which is not a loopback address: configure at least one user in "
                      "ui.users (pgjobd ui-passwd makes the password_hash)",
                  "ui.listen");
  }
  rules.require(ui.refresh >= Millis(1000), "ui.refresh",
                "must be at least 1s, got " + format_duration(ui.refresh));
  rules.require(ui.session_ttl >= Millis(60000), "ui.session_ttl",
                "must be at least 1m, got " + format_duration(ui.session_ttl));
  rules.require(ui.statement_timeout > Millis(0), "ui.statement_timeout", "must be more than 0");
  for (const auto& [name, user] : ui.users) {
    std::string key = "ui.users." + name;
    rules.require(is_user_name(name), key,
                  "a user name is 1 to 100 printable characters without spaces");
    rules.require(user.role == "operator" || user.role == "read_only", key + ".role",
                  "unknown role " + single_quoted(user.role) + " (use operator or read_only)");
    rules.require(is_crypt_hash(user.password_hash), key + ".password_hash",
                  "not a crypt(3) hash such as $y$j9T$...: store the output of `pgjobd "
                  "ui-passwd`, never the password itself");
  }
}

}  // namespace

void check_config(const Config& config, Diagnostics& diag) {
  Rules rules(diag);
  check_database(config.database, rules);
  check_worker(config.worker, rules);
  check_timing(config, rules);
  check_output(config, rules);
  check_ui(config.ui, rules);
  for (const auto& [type, handler] : config.handlers) {
    check_handler(type, handler, rules);
  }
  if (config.schedules) {
    for (const auto& [name, schedule] : *config.schedules) check_schedule(name, schedule, rules);
    check_schedule_load(*config.schedules, rules);
  }
  if (config.limits) {
    for (const auto& [name, limit] : *config.limits) check_limit(name, limit, rules);
  }
}

}  // namespace pgjobd::config_detail
