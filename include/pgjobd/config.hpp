#pragma once
// pgjobd's configuration: the YAML file's structure, with every default in one place.
// src/config/config_keys.cpp declares each key's name, documentation and reload behaviour;
// config/pgjobd.yaml and the README document them for operators.

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pgjobd/duration.hpp"

namespace pgjobd {

struct DatabaseConfig {
  // libpq URL or key=value string. PGJOBD_DATABASE_URL, else DATABASE_URL, overrides it.
  std::string url = "postgresql://localhost/pgjobd";
  // Schema holding the jobs table. Must be a plain identifier (letters, digits, _).
  std::string schema = "public";
  // Apply pending migrations when `run` starts instead of refusing to start.
  bool migrate_on_start = false;
  // Claims wait for their WAL flush like any commit. Off (the default), a claim commits
  // asynchronously: faster, and no job can be lost by it, but a server crash within
  // about wal_writer_delay of a claim undoes the claim, so its job runs again.
  bool synchronous_claims = false;
  // "none", or "transaction" when `url` leads to a transaction-pooling PgBouncer: then no
  // statement is prepared by name (a server connection serves other clients between two
  // transactions) and nothing is set for the session.
  std::string pooler = "none";
  // Where the LISTEN session connects, if not `url`: LISTEN needs a session of its own,
  // which a transaction pooler does not give. Empty: `url`, except with a transaction
  // pooler, where the daemon then polls (no LISTEN).
  std::string listen_url;
  // How long one call to the database may wait for its answer; one still waiting then is
  // abandoned: its session is closed, the work retried or released (src/db/call_deadline.hpp).
  // 0 (the default): lease.duration / 2, between 2 s and 60 s (effective_call_timeout).
  Millis call_timeout{0};

  bool operator==(const DatabaseConfig&) const = default;
};

struct QueueConfig {
  // Most jobs of this queue running at once; 0 = bounded only by worker.concurrency.
  int concurrency = 0;

  bool operator==(const QueueConfig&) const = default;
};

struct WorkerConfig {
  int concurrency = 16;  // jobs running at once across all queues
  // Queues this daemon serves. Empty in the file means {default: {}}.
  std::map<std::string, QueueConfig> queues = {{"default", {}}};
  // A job whose payload (as JSON text) is larger is not read nor run: it ends dead, saying
  // why. Bounds the memory a claim can take: concurrency × this in running jobs' payloads;
  // the jobs held by prefetch are kept to about 32 MB of payloads.
  int max_payload_bytes = 4 * 1024 * 1024;
  // The most of a done job's result kept in jobs.result, in bytes of the handler's output
  // (exec stdout, an http body, the sql rows as JSON, an in-process value); above it the
  // job is done with {"truncated": true, "bytes": N, "head": "..."} (README "Results").
  // Bounds the memory too: a handler keeps no more while reading. 0: no results kept.
  int max_result_bytes = 64 * 1024;
  // Claimed jobs the daemon may hold beyond its workers, waiting for one, so that a claim
  // takes more jobs per statement on a backlog of short jobs. Adaptive below this bound:
  // only for jobs under 10 ms on average, at most the jobs finished in the last 50 ms
  // (engine/prefetch_budget.hpp). 0: none.
  int prefetch = 1000;
  // Announce the jobs this daemon ends on the pgjobd_finished channel (README "Results and
  // workflows"): one small transaction per batch of completions.
  bool notify_finished = true;
  // The CPU scheduling policy of the daemon's threads (runtime/scheduling.hpp): "batch"
  // (SCHED_BATCH: a woken thread waits for the running one's time slice instead of taking
  // its core) or "normal" (the policy the daemon was started with, kept as it is).
  std::string scheduling = "batch";

  bool operator==(const WorkerConfig&) const = default;
};

struct PollConfig {
  Millis min_interval{50};    // poll interval while work keeps arriving
  Millis max_interval{5000};  // an idle daemon backs off (doubling) up to this
  bool listen_notify = true;  // wake at once on the INSERT trigger's NOTIFY

  bool operator==(const PollConfig&) const = default;
};

struct RetryConfig {
  Millis base{1000};         // first retry delay; doubles each attempt
  Millis max_delay{600000};  // cap on the delay
  double jitter = 0.1;       // ± this fraction of the delay, in [0, 1]

  bool operator==(const RetryConfig&) const = default;
};

struct LeaseConfig {
  Millis duration{30000};  // how long a claim lasts without a heartbeat

  bool operator==(const LeaseConfig&) const = default;
};

struct ShutdownConfig {
  Millis timeout{30000};  // how long a drain waits for running jobs

  bool operator==(const ShutdownConfig&) const = default;
};

struct RetentionConfig {
  Millis done{24LL * 3600 * 1000};      // keep done/cancelled jobs this long (0 = delete at once)
  Millis dead{7LL * 24 * 3600 * 1000};  // keep dead jobs this long

  bool operator==(const RetentionConfig&) const = default;
};

struct MetricsConfig {
  // host:port for /metrics, /healthz, /readyz. Empty disables the HTTP endpoint.
  std::string listen = "127.0.0.1:9464";

  bool operator==(const MetricsConfig&) const = default;
};

// A dashboard user (README "Dashboard"): a crypt(3) hash, never the password itself.
struct UiUserConfig {
  std::string password_hash;  // e.g. "$y$j9T$..." from `pgjobd ui-passwd`
  std::string role;           // "operator" (may act) or "read_only" (may only look)

  bool operator==(const UiUserConfig&) const = default;
};

// The web dashboard (README "Dashboard"), off unless `listen` is set.
struct UiConfig {
  // host:port of the dashboard; empty disables it. A non-loopback address needs users.
  std::string listen;
  bool show_payloads = true;               // job pages show payloads (they may hold secrets)
  Millis refresh{5000};                    // pages refresh themselves this often while visible
  Millis session_ttl{12LL * 3600 * 1000};  // a login lasts this long
  Millis statement_timeout{2000};          // every dashboard query gives up after this
  // name → user. None: no login, which only a loopback `listen` allows.
  std::map<std::string, UiUserConfig> users;

  bool operator==(const UiConfig&) const = default;
};

struct LogConfig {
  std::string level = "info";   // trace, debug, info, warn, error, critical, off
  std::string format = "text";  // text or json

  bool operator==(const LogConfig&) const = default;
};

// handlers.TYPE.dead_letter (README "Dead letters"): a job of TYPE that ends dead enqueues
// a `type` job, in `queue` ("" = the dead job's queue), whose payload describes it.
struct DeadLetterConfig {
  std::string type;
  std::string queue;

  bool operator==(const DeadLetterConfig&) const = default;
};

struct HandlerConfig {
  enum class Kind { kExec, kHttp, kSql, kBuiltin };
  Kind kind = Kind::kBuiltin;
  std::vector<std::string> exec_argv;     // exec: program and arguments, no shell
  std::vector<int> permanent_exit_codes;  // exec: these exit codes make the job dead
  std::string http_url;                   // http: the URL the payload is POSTed to
  std::string sql;                        // sql: statement with $1 = payload (jsonb), $2 = job id
  std::string builtin;                    // builtin: "noop"
  Millis timeout{0};                      // 0 = no timeout
  Millis kill_grace{5000};                // exec: time between SIGTERM and SIGKILL on timeout
  std::optional<DeadLetterConfig> dead_letter;  // none: a dead job enqueues nothing

  bool operator==(const HandlerConfig&) const = default;
};

// A recurring job (README "Recurring jobs"): each tick of `cron` or `every` inserts one job.
struct ScheduleConfig {
  std::string cron;              // a cron line (src/schedule/cron_expression.hpp); or
  Millis every{0};               // a fixed interval: exactly one of the two is set
  std::string timezone = "UTC";  // IANA name the cron line is read in
  std::string type;              // the job's type (required)
  std::string queue = "default";
  int priority = 0;
  int max_attempts = 5;
  std::string payload = "{}";  // JSON text
  bool enabled = true;
  std::string overlap = "allow";  // allow, or skip: no new job while the last one is live
  std::string misfire = "skip";   // skip, all or none: what happens to missed ticks
  Millis misfire_grace{3600000};  // skip: the latest missed tick fires if this recent

  bool operator==(const ScheduleConfig&) const = default;
};

// A concurrency and/or rate limit shared by every daemon (README "Limits"). The daemons
// keep the definitions in the database (pgjobd_limits) and count in it, so the limit holds
// across all of them.
struct LimitConfig {
  std::vector<std::string> types;   // job types it applies to; empty = any (queues then set)
  std::vector<std::string> queues;  // queues it applies to; empty = any (types then set)
  // A top-level payload field: each value is a partition with the limit of its own. Jobs
  // without the field share one partition. Empty: one partition for all matching jobs.
  std::string key;
  int concurrency = 0;  // most running at once per partition; 0 = no concurrency limit
  // Starts per second on average (token bucket per partition), as written: "10/s", "60/m",
  // "100/h"; empty = no rate limit. rate_per_second is its value.
  std::string rate;
  double rate_per_second = 0;
  int burst = 1;  // tokens a partition can save up: starts allowed at once after a pause

  bool operator==(const LimitConfig&) const = default;
};

struct Config {
  DatabaseConfig database;
  WorkerConfig worker;
  PollConfig poll;
  RetryConfig retry;
  LeaseConfig lease;
  ShutdownConfig shutdown;
  RetentionConfig retention;
  MetricsConfig metrics;
  LogConfig log;
  UiConfig ui;
  std::map<std::string, HandlerConfig> handlers;  // job type → handler
  // schedule name → schedule. Absent (no `schedules:` section): this daemon writes no
  // schedules and fires those in the database; present, even empty, it reconciles the
  // YAML schedules to it at start and reload.
  std::optional<std::map<std::string, ScheduleConfig>> schedules;
  // limit name → limit. Absent (no `limits:` section): this daemon writes no definitions
  // and applies those in the database; present, even empty, it writes its own at start
  // and reload.
  std::optional<std::map<std::string, LimitConfig>> limits;

  bool operator==(const Config&) const = default;
};

// Every problem found in a config file, each naming file, line and key, e.g.
// "pgjobd.yaml:12: poll.max_interval: bad duration '5x' (use 250ms, 5s, 10m, 1h or 7d)".
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// Reads and validates a YAML file; applies the DATABASE_URL overrides. Throws ConfigError.
Config load_config(const std::string& path);

// Parses YAML text; `source_name` is used in messages. Does not read the environment.
Config parse_config(const std::string& yaml_text, const std::string& source_name);

// Checks cross-field rules (min ≤ max interval, concurrency > 0, ...). Throws ConfigError.
void validate_config(const Config& config, const std::string& source_name);

// database.call_timeout, or when it is 0 the default derived from the lease: half of it, so
// that a heartbeat abandoned at its deadline is retried before the lease runs out, and not
// under 2 s, which a busy server's ordinary call can take.
Millis effective_call_timeout(const Config& config);

// Applies PGJOBD_DATABASE_URL, else DATABASE_URL, to config.database.url.
void apply_environment(Config& config);

}  // namespace pgjobd
