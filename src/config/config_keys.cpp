// The table of config keys: name, default, reload behaviour, documentation, and where each
// key lives in Config. Adding a key is one entry here plus its field in pgjobd/config.hpp.
#include "config/config_keys.hpp"

#include <algorithm>

#include "config/config_stages.hpp"
#include "config/yaml_section.hpp"

namespace pgjobd {
namespace {

using config_detail::YamlSection;
using Reader = void (*)(YamlSection& parent, std::string_view key, Config& config);

// Reads, compares and copies Config's `kSection`.`kMember`.
template <auto kSection, auto kMember>
struct Field {
  static auto& get(Config& config) { return (config.*kSection).*kMember; }
  static const auto& get(const Config& config) { return (config.*kSection).*kMember; }
  static void read(YamlSection& parent, std::string_view key, Config& config) {
    parent.read(key, get(config));
  }
  static bool differs(const Config& a, const Config& b) { return get(a) != get(b); }
  static void copy(Config& to, const Config& from) { get(to) = get(from); }
};

// A key with a fixed place in Config; `read` replaces the plain scalar reader for a map.
template <auto kSection, auto kMember>
constexpr ConfigKey field(std::string_view name, std::string_view default_text, Reload reload,
                          std::string_view doc, Reader read = &Field<kSection, kMember>::read) {
  using F = Field<kSection, kMember>;
  return {name, default_text, reload, doc, read, &F::differs, &F::copy};
}

// A key of a NAME or TYPE entry: it has no fixed place in Config, its map's reader reads it.
constexpr ConfigKey in_entry(std::string_view name, std::string_view default_text, Reload reload,
                             std::string_view doc, Reader read = nullptr) {
  return {name, default_text, reload, doc, read, nullptr, nullptr};
}

constexpr Reload kLive = Reload::kLive;
// Kept at start-up: the connections, the listening socket, the LISTEN session and the lease
// the heartbeats renew are built once and live as long as the daemon.
constexpr Reload kRestart = Reload::kRestart;

using config_detail::read_handlers;
using config_detail::read_limits;
using config_detail::read_queues;
using config_detail::read_schedules;
using config_detail::read_ui_users;

constexpr ConfigKey kKeys[] = {
    field<&Config::database, &DatabaseConfig::url>(
        "database.url", "postgresql://localhost/pgjobd", kRestart,
        "libpq URL or `key=value` string; overridden by `PGJOBD_DATABASE_URL`, else "
        "`DATABASE_URL`"),
    field<&Config::database, &DatabaseConfig::schema>(
        "database.schema", "public", kRestart,
        "schema holding `jobs`, `pgjobd_migrations` and `pgjobd_leader`; a plain identifier"),
    field<&Config::database, &DatabaseConfig::migrate_on_start>(
        "database.migrate_on_start", "false", kRestart,
        "`run` applies pending migrations; when false it refuses to start on an out-of-date "
        "schema"),
    field<&Config::database, &DatabaseConfig::synchronous_claims>(
        "database.synchronous_claims", "false", kRestart,
        "claims wait for their WAL flush like any commit; when false a claim commits "
        "asynchronously (see [Job lifecycle](#job-lifecycle-and-delivery-guarantee))"),
    field<&Config::database, &DatabaseConfig::pooler>(
        "database.pooler", "none", kRestart,
        "`transaction` when `url` leads to a transaction-pooling PgBouncer: statements are "
        "sent unnamed or, for the hot ones, as calls of functions that keep their plans; "
        "nothing is set per session (see [PgBouncer](#pgbouncer)); else `none`"),
    field<&Config::database, &DatabaseConfig::listen_url>(
        "database.listen_url", "", kRestart,
        "where the LISTEN session connects, e.g. past the pooler; empty: `url`, or no LISTEN "
        "(polling only) with `pooler: transaction`"),
    field<&Config::database, &DatabaseConfig::call_timeout>(
        "database.call_timeout", "0", kRestart,
        "a database call still unanswered after this is abandoned: its session is closed and "
        "the work retried or released; `0`: half of `lease.duration`, between 2s and 60s (see "
        "[When the database stops answering](#when-the-database-stops-answering))"),
    field<&Config::worker, &WorkerConfig::concurrency>(
        "worker.concurrency", "16", kLive, "most jobs running at once in this daemon, 1..10000"),
    field<&Config::worker, &WorkerConfig::queues>(
        "worker.queues", "{default: {}}", kLive,
        "queues this daemon claims from; writing the key replaces the default; at least one",
        &read_queues),
    in_entry("worker.queues.NAME.concurrency", "0", kLive,
             "most jobs of this queue at once, 0..`worker.concurrency`; 0 = only the global "
             "limit"),
    field<&Config::worker, &WorkerConfig::max_payload_bytes>(
        "worker.max_payload_bytes", "4194304", kLive,
        "a job whose payload is larger (as JSON text) is not run: it ends `dead`, saying why; "
        "1024..1073741823"),
    field<&Config::worker, &WorkerConfig::max_result_bytes>(
        "worker.max_result_bytes", "65536", kLive,
        "the most of a done job's result (exec stdout, http body, sql rows, in-process value) "
        "kept in `jobs.result`; above it `{\"truncated\": true, \"bytes\": N, \"head\": "
        "\"...\"}` is kept and the job is done all the same (see [Results](#results)); 0 = keep "
        "no results, 0..16777216"),
    field<&Config::worker, &WorkerConfig::prefetch>(
        "worker.prefetch", "1000", kLive,
        "claimed jobs held beyond the workers, waiting for one, so that a claim takes more "
        "jobs at once: only while jobs take under 10 ms on average, at most as many as the "
        "workers finished in the last 50 ms and about 32 MB of payloads; none while a keyed "
        "rate limit applies (see [Limits](#limits)); 0 = off, 0..10000"),
    field<&Config::worker, &WorkerConfig::notify_finished>(
        "worker.notify_finished", "true", kLive,
        "announce the jobs this daemon ends (done, dead, cancelled) on the `pgjobd_finished` "
        "channel after their commit, one small transaction per 10 ms at most (see "
        "[Results and workflows](#results-and-workflows))"),
    field<&Config::worker, &WorkerConfig::scheduling>(
        "worker.scheduling", "batch", kRestart,
        "`batch`: the daemon's threads run under Linux's `SCHED_BATCH`, so a thread woken (an "
        "http response, the database's answer) waits for the running thread's time slice "
        "instead of taking its core, and takes more at once: on a host whose cores are busy, "
        "fewer context switches and less CPU per job, for up to a time slice (a few ms) more "
        "latency; exec jobs' programs start under the policy the daemon had before; `normal`: "
        "the daemon keeps the policy it was started with (see [CPU scheduling](#cpu-scheduling))"),
    field<&Config::poll, &PollConfig::min_interval>("poll.min_interval", "50ms", kLive,
                                                    "poll interval while jobs keep arriving (> 0)"),
    field<&Config::poll, &PollConfig::max_interval>(
        "poll.max_interval", "5s", kLive,
        "an idle daemon doubles its interval up to this (≥ `min_interval`); it still wakes "
        "at once for a NOTIFY and at the `run_at` of the next delayed job or retry it knows "
        "of"),
    field<&Config::poll, &PollConfig::listen_notify>(
        "poll.listen_notify", "true", kRestart,
        "LISTEN for the insert trigger's NOTIFY (at most one per 2 ms per schema) and wake "
        "at once, claim once more 4 ms later (for the INSERTs that relied on that NOTIFY), "
        "then poll once more after `min_interval`; after NOTIFYs whose claims found nothing, "
        "up to 20 ms apart (see [Job lifecycle](#job-lifecycle-and-delivery-guarantee))"),
    field<&Config::retry, &RetryConfig::base>(
        "retry.base", "1s", kLive, "delay before the first retry; doubles each attempt (> 0)"),
    field<&Config::retry, &RetryConfig::max_delay>(
        "retry.max_delay", "10m", kLive,
        "cap on the retry delay (≥ `base`), a handler's own delay (HTTP `Retry-After`, "
        "`JobResult::retry(error, after)`) included"),
    field<&Config::retry, &RetryConfig::jitter>(
        "retry.jitter", "0.1", kLive, "each delay is randomised by ± this fraction, 0..1"),
    field<&Config::lease, &LeaseConfig::duration>(
        "lease.duration", "30s", kRestart,
        "how long a claim lasts without a heartbeat; a dead daemon's jobs are rescued after it "
        "(≥ `1s`)"),
    field<&Config::shutdown, &ShutdownConfig::timeout>(
        "shutdown.timeout", "30s", kLive,
        "on SIGTERM/SIGINT, how long to wait for running jobs before releasing them"),
    field<&Config::retention, &RetentionConfig::done>(
        "retention.done", "24h", kLive,
        "keep done and cancelled jobs this long; `0` deletes done jobs at completion"),
    field<&Config::retention, &RetentionConfig::dead>("retention.dead", "7d", kLive,
                                                      "keep dead jobs this long"),
    field<&Config::metrics, &MetricsConfig::listen>(
        "metrics.listen", "127.0.0.1:9464", kRestart,
        "`host:port` of `/metrics`, `/healthz`, `/readyz`; `\"\"` disables; port 0 picks one "
        "(logged); IPv6 as `[::1]:9464`"),
    field<&Config::log, &LogConfig::level>(
        "log.level", "info", kLive,
        "`trace`, `debug`, `info`, `warn`, `error`, `critical` or `off`; the `SPDLOG_LEVEL` "
        "environment variable wins"),
    field<&Config::log, &LogConfig::format>("log.format", "text", kLive,
                                            "`text`, or `json` (one object per line)"),
    field<&Config::ui, &UiConfig::listen>(
        "ui.listen", "", kRestart,
        "`host:port` of the web dashboard (see [Dashboard](#dashboard)); `\"\"` (the default) "
        "disables it; a non-loopback address needs `users`"),
    field<&Config::ui, &UiConfig::show_payloads>(
        "ui.show_payloads", "true", kLive,
        "job pages show payloads; false hides them (they may hold personal data or secrets)"),
    field<&Config::ui, &UiConfig::refresh>(
        "ui.refresh", "5s", kLive,
        "pages reload themselves this often while the browser tab is visible (≥ `1s`)"),
    field<&Config::ui, &UiConfig::session_ttl>("ui.session_ttl", "12h", kLive,
                                               "a login lasts this long (≥ `1m`)"),
    field<&Config::ui, &UiConfig::statement_timeout>(
        "ui.statement_timeout", "2s", kRestart,
        "every dashboard query is cancelled after this (> 0); the page then says the "
        "database is unavailable"),
    field<&Config::ui, &UiConfig::users>(
        "ui.users", "{}", kLive,
        "dashboard users; none: no login, everyone acts as `anonymous` operator, allowed only "
        "on a loopback `listen`",
        &read_ui_users),
    in_entry("ui.users.NAME.password_hash", "", kLive,
             "crypt(3) hash of the password (yescrypt `$y$...` from `pgjobd ui-passwd`); "
             "required"),
    in_entry("ui.users.NAME.role", "", kLive,
             "`operator` (may retry, cancel, pause, resume) or `read_only`; required"),
    in_entry("handlers.TYPE", "", kLive,
             "the handler for jobs of this type (none by default): exactly one of `exec`, "
             "`http`, `sql`, `builtin`",
             &read_handlers),
    in_entry("handlers.TYPE.exec", "", kLive, "program and arguments, a list (no shell)"),
    in_entry("handlers.TYPE.http.url", "", kLive,
             "`http://` or `https://` URL the payload is POSTed to"),
    in_entry("handlers.TYPE.sql", "", kLive,
             "one statement with `$1` = payload (jsonb), `$2` = job id (bigint), run in the "
             "transaction that marks the job done (see below)"),
    in_entry("handlers.TYPE.builtin", "", kLive, "`noop`"),
    in_entry("handlers.TYPE.timeout", "0", kLive, "`0` = no timeout (http: `0` means 30 s)"),
    in_entry("handlers.TYPE.permanent_exit_codes", "[]", kLive,
             "exec only: exit codes (1..255) that make the job dead"),
    in_entry("handlers.TYPE.kill_grace", "5s", kLive,
             "exec only: time between SIGTERM and SIGKILL when the job must stop"),
    in_entry("handlers.TYPE.dead_letter.type", "", kLive,
             "a job of TYPE that ends dead enqueues a job of this type (see [Dead "
             "letters](#dead-letters)); may be TYPE itself"),
    in_entry("handlers.TYPE.dead_letter.queue", "", kLive,
             "the dead-letter job's queue; empty = the dead job's queue"),
    in_entry("schedules.NAME", "", kLive,
             "a recurring job (none by default; see [Recurring jobs](#recurring-jobs)): exactly "
             "one of `cron`, `every`; NAME is letters, digits, `_`, `-`, `.` (at most 100)",
             &read_schedules),
    in_entry("schedules.NAME.cron", "", kLive,
             "cron line: 5 fields, or 6 with leading seconds, or `@daily` and the like"),
    in_entry("schedules.NAME.every", "", kLive,
             "fixed interval (≥ `1s`, whole seconds): ticks at its multiples since 1970-01-01 "
             "UTC"),
    in_entry("schedules.NAME.timezone", "UTC", kLive,
             "IANA time zone the cron line is read in, e.g. `Europe/Berlin`"),
    in_entry("schedules.NAME.type", "", kLive, "the job type each tick inserts (required)"),
    in_entry("schedules.NAME.queue", "default", kLive, "the jobs' queue"),
    in_entry("schedules.NAME.priority", "0", kLive, "the jobs' priority, -32768..32767"),
    in_entry("schedules.NAME.max_attempts", "5", kLive, "the jobs' max_attempts, ≥ 1"),
    in_entry("schedules.NAME.payload", "{}", kLive,
             "the jobs' payload (any YAML, stored as JSON); an object gains `_schedule`"),
    in_entry("schedules.NAME.enabled", "true", kLive,
             "false stops the ticks; enabling again never fires the ticks missed meanwhile"),
    in_entry("schedules.NAME.overlap", "allow", kLive,
             "`skip`: no job for a tick while the previous tick's job is still live"),
    in_entry("schedules.NAME.misfire", "skip", kLive,
             "missed ticks: `skip` fires the latest once, `all` each (at most 100), `none` "
             "none"),
    in_entry("schedules.NAME.misfire_grace", "1h", kLive,
             "`skip`: the latest missed tick fires only if at most this late"),
    in_entry("limits.NAME", "", kLive,
             "a concurrency and/or rate limit over every daemon (none by default; see "
             "[Limits](#limits)); NAME is letters, digits, `_`, `-`, `.` (at most 100)",
             &read_limits),
    in_entry("limits.NAME.types", "[]", kLive,
             "job types it applies to; with `queues` too, jobs must match both"),
    in_entry("limits.NAME.queues", "[]", kLive, "queues it applies to"),
    in_entry("limits.NAME.key", "", kLive,
             "top-level payload field: each value gets the limit to itself; jobs without "
             "it share one partition"),
    in_entry("limits.NAME.concurrency", "0", kLive,
             "most jobs running at once per partition, across all daemons; `0` = none"),
    in_entry("limits.NAME.rate", "", kLive,
             "most starts per partition on average: `10/s`, `60/m`, `100/h` (retries "
             "count)"),
    in_entry("limits.NAME.burst", "1", kLive,
             "starts a partition may save up and make at once (with `rate`)"),
};

}  // namespace

std::span<const ConfigKey> config_keys() { return kKeys; }

std::string_view section_of(std::string_view key) { return key.substr(0, key.find('.')); }

std::string_view below_section(std::string_view key) {
  std::string_view::size_type dot = key.find('.');
  return dot == std::string_view::npos ? std::string_view() : key.substr(dot + 1);
}

std::vector<std::string_view> config_sections() {
  std::vector<std::string_view> sections;
  for (const ConfigKey& key : kKeys) {
    std::string_view section = section_of(key.name);
    if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
      sections.push_back(section);
    }
  }
  return sections;
}

}  // namespace pgjobd
