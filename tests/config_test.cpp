// Unit tests for the config loader: defaults, the full schema, error messages with file, line
// and key, cross-field rules, the environment overrides and the shipped example file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "support/build_paths.hpp"
#include "support/config_problems.hpp"
#include "support/test_text.hpp"

namespace pgjobd {
namespace {

using Kind = HandlerConfig::Kind;

using testing::problem;
using testing::problems;

using testing::contains;

// Clears PGJOBD_DATABASE_URL and DATABASE_URL for a test and restores them afterwards.
class EnvGuard {
 public:
  EnvGuard() {
    for (std::size_t i = 0; i < kNames.size(); ++i) {
      if (const char* value = std::getenv(kNames[i])) saved_[i] = value;
      unsetenv(kNames[i]);
    }
  }
  ~EnvGuard() {
    for (std::size_t i = 0; i < kNames.size(); ++i) {
      if (saved_[i]) {
        setenv(kNames[i], saved_[i]->c_str(), 1);
      } else {
        unsetenv(kNames[i]);
      }
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  static constexpr std::array<const char*, 2> kNames = {"PGJOBD_DATABASE_URL", "DATABASE_URL"};
  std::array<std::optional<std::string>, 2> saved_;
};

// A file in the temp directory, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& text)
      : path_(std::filesystem::temp_directory_path() /
              ("pgjobd_config_test_" + std::to_string(getpid()) + "_" + std::to_string(counter_++) +
               ".yaml")) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

TEST(ConfigLoaderTest, EmptyTextGivesAllDefaults) {
  for (const char* text : {"", "# only a comment\n", "---\n"}) {
    Config config = parse_config(text, "empty.yaml");
    EXPECT_EQ(config.database.url, "postgresql://localhost/pgjobd");
    EXPECT_EQ(config.database.schema, "public");
    EXPECT_FALSE(config.database.migrate_on_start);
    EXPECT_FALSE(config.database.synchronous_claims);
    EXPECT_EQ(config.worker.concurrency, 16);
    ASSERT_EQ(config.worker.queues.size(), 1u);
    EXPECT_EQ(config.worker.queues.begin()->first, "default");
    EXPECT_EQ(config.worker.queues.begin()->second.concurrency, 0);
    EXPECT_EQ(config.poll.min_interval, Millis(50));
    EXPECT_EQ(config.poll.max_interval, Millis(5'000));
    EXPECT_TRUE(config.poll.listen_notify);
    EXPECT_EQ(config.retry.base, Millis(1'000));
    EXPECT_EQ(config.retry.max_delay, Millis(600'000));
    EXPECT_DOUBLE_EQ(config.retry.jitter, 0.1);
    EXPECT_EQ(config.lease.duration, Millis(30'000));
    EXPECT_EQ(config.shutdown.timeout, Millis(30'000));
    EXPECT_EQ(config.retention.done, Millis(86'400'000));
    EXPECT_EQ(config.retention.dead, Millis(7 * 86'400'000LL));
    EXPECT_EQ(config.metrics.listen, "127.0.0.1:9464");
    EXPECT_EQ(config.log.level, "info");
    EXPECT_EQ(config.log.format, "text");
    EXPECT_TRUE(config.handlers.empty());
  }
}

TEST(ConfigLoaderTest, SectionsWithEveryKeyCommentedOutKeepDefaults) {
  Config config = parse_config("database:\n  # url: x\nworker:\nhandlers:\n", "t.yaml");
  EXPECT_EQ(config.database.url, "postgresql://localhost/pgjobd");
  EXPECT_EQ(config.worker.queues.count("default"), 1u);
  EXPECT_TRUE(config.handlers.empty());
}

// DESIGN.md's example, verbatim.
constexpr const char* kDesignExample = R"yaml(
database: {url: postgresql://pgjobd@localhost/pgjobd, schema: public, migrate_on_start: false}
worker:   {concurrency: 16, queues: {default: {}, mail: {concurrency: 4}}}
poll:     {min_interval: 50ms, max_interval: 5s, listen_notify: true}
retry:    {base: 1s, max_delay: 10m, jitter: 0.1}
lease:    {duration: 30s}
shutdown: {timeout: 30s}
retention: {done: 24h, dead: 7d}
metrics:  {listen: 127.0.0.1:9464}
log:      {level: info, format: text}      # or json
handlers:
  send_email: {exec: [/usr/local/bin/send-email], timeout: 30s, permanent_exit_codes: [65]}
  thumbnail:  {http: {url: http://images:8080/thumb}, timeout: 10s}
  rollup:     {sql: "select app.rollup($1)"}
  ping:       {builtin: noop}
)yaml";

TEST(ConfigLoaderTest, DesignExampleParses) {
  Config config = parse_config(kDesignExample, "design.yaml");
  EXPECT_EQ(config.database.url, "postgresql://pgjobd@localhost/pgjobd");
  EXPECT_EQ(config.worker.concurrency, 16);
  ASSERT_EQ(config.worker.queues.size(), 2u);
  EXPECT_EQ(config.worker.queues.at("default").concurrency, 0);
  EXPECT_EQ(config.worker.queues.at("mail").concurrency, 4);
  EXPECT_EQ(config.metrics.listen, "127.0.0.1:9464");
  ASSERT_EQ(config.handlers.size(), 4u);

  const HandlerConfig& email = config.handlers.at("send_email");
  EXPECT_EQ(email.kind, Kind::kExec);
  EXPECT_EQ(email.exec_argv, std::vector<std::string>{"/usr/local/bin/send-email"});
  EXPECT_EQ(email.timeout, Millis(30'000));
  EXPECT_EQ(email.permanent_exit_codes, std::vector<int>{65});
  EXPECT_EQ(email.kill_grace, Millis(5'000));

  const HandlerConfig& thumbnail = config.handlers.at("thumbnail");
  EXPECT_EQ(thumbnail.kind, Kind::kHttp);
  EXPECT_EQ(thumbnail.http_url, "http://images:8080/thumb");
  EXPECT_EQ(thumbnail.timeout, Millis(10'000));

  EXPECT_EQ(config.handlers.at("rollup").kind, Kind::kSql);
  EXPECT_EQ(config.handlers.at("rollup").sql, "select app.rollup($1)");
  EXPECT_EQ(config.handlers.at("rollup").timeout, Millis(0));
  EXPECT_EQ(config.handlers.at("ping").kind, Kind::kBuiltin);
  EXPECT_EQ(config.handlers.at("ping").builtin, "noop");
}

TEST(ConfigLoaderTest, EveryKeyIsRead) {
  Config config = parse_config(R"(
database:
  url: postgresql://u@db/app
  schema: jobs_1
  migrate_on_start: yes
  synchronous_claims: true
  pooler: transaction
  listen_url: "postgresql://pgjobd@db:5432/app"
worker:
  concurrency: 32
  scheduling: normal
  queues:
    fast: {concurrency: 8}
    slow:
poll: {min_interval: 250ms, max_interval: 1m, listen_notify: off}
retry: {base: 2s, max_delay: 1h, jitter: 0}
lease: {duration: 1m}
shutdown: {timeout: 0}
retention: {done: 0, dead: 30d}
metrics: {listen: "[::1]:0"}
log: {level: debug, format: json}
handlers:
  slow_job: {exec: [/bin/true, a b], timeout: 1h, kill_grace: 250ms, permanent_exit_codes: [1, 255]}
  fast_job: {builtin: noop, dead_letter: {type: fast_job_dead, queue: dlq}}
)",
                               "t.yaml");
  EXPECT_EQ(config.database.url, "postgresql://u@db/app");
  EXPECT_EQ(config.database.schema, "jobs_1");
  EXPECT_TRUE(config.database.migrate_on_start);
  EXPECT_TRUE(config.database.synchronous_claims);
  EXPECT_EQ(config.database.pooler, "transaction");
  EXPECT_EQ(config.database.listen_url, "postgresql://pgjobd@db:5432/app");
  EXPECT_EQ(config.worker.concurrency, 32);
  ASSERT_EQ(config.worker.queues.size(), 2u);  // replaces the default queue
  EXPECT_EQ(config.worker.queues.at("fast").concurrency, 8);
  EXPECT_EQ(config.worker.queues.at("slow").concurrency, 0);
  EXPECT_EQ(config.worker.scheduling, "normal");
  EXPECT_EQ(config.poll.min_interval, Millis(250));
  EXPECT_EQ(config.poll.max_interval, Millis(60'000));
  EXPECT_FALSE(config.poll.listen_notify);
  EXPECT_EQ(config.retry.base, Millis(2'000));
  EXPECT_EQ(config.retry.max_delay, Millis(3'600'000));
  EXPECT_DOUBLE_EQ(config.retry.jitter, 0.0);
  EXPECT_EQ(config.lease.duration, Millis(60'000));
  EXPECT_EQ(config.shutdown.timeout, Millis(0));
  EXPECT_EQ(config.retention.done, Millis(0));
  EXPECT_EQ(config.retention.dead, Millis(30 * 86'400'000LL));
  EXPECT_EQ(config.metrics.listen, "[::1]:0");
  EXPECT_EQ(config.log.level, "debug");
  EXPECT_EQ(config.log.format, "json");
  const HandlerConfig& job = config.handlers.at("slow_job");
  EXPECT_EQ(job.exec_argv, (std::vector<std::string>{"/bin/true", "a b"}));
  EXPECT_EQ(job.timeout, Millis(3'600'000));
  EXPECT_EQ(job.kill_grace, Millis(250));
  EXPECT_EQ(job.permanent_exit_codes, (std::vector<int>{1, 255}));
  EXPECT_FALSE(job.dead_letter);
  EXPECT_EQ(config.handlers.at("fast_job").dead_letter, (DeadLetterConfig{"fast_job_dead", "dlq"}));
}

TEST(ConfigLoaderTest, UnknownKeyNamesFileLineAndKeyWithSuggestion) {
  EXPECT_EQ(problem("database:\n  url: x\nworker:\n  concurency: 4\n"),
            "t.yaml:4: worker.concurency: unknown key (did you mean 'concurrency'?)");
  EXPECT_EQ(problem("poll: {min_interval: 1s, max_intreval: 5s}\n"),
            "t.yaml:1: poll.max_intreval: unknown key (did you mean 'max_interval'?)");
  EXPECT_EQ(problem("handlers:\n  x:\n    builtin: noop\n    tiemout: 5s\n"),
            "t.yaml:4: handlers.x.tiemout: unknown key (did you mean 'timeout'?)");
}

TEST(ConfigLoaderTest, UnknownKeyWithoutCloseMatchListsTheAllowedKeys) {
  EXPECT_EQ(problem("\n\nbogus: 1\n"),
            "t.yaml:3: bogus: unknown key (expected one of: database, worker, poll, retry, "
            "lease, shutdown, retention, metrics, log, ui, handlers, schedules, limits)");
  EXPECT_EQ(problem("worker:\n  queues:\n    mail: {priority: 3}\n"),
            "t.yaml:3: worker.queues.mail.priority: unknown key (expected one of: concurrency)");
}

TEST(ConfigLoaderTest, BadDurationNamesLineAndKey) {
  EXPECT_EQ(problem("poll:\n  min_interval: 50ms\n  max_interval: 5x\n"),
            "t.yaml:3: poll.max_interval: bad duration '5x' (use 250ms, 5s, 10m, 1h or 7d)");
  EXPECT_EQ(problem("lease: {duration: 1.5s}\n"),
            "t.yaml:1: lease.duration: bad duration '1.5s' (no fractions: write 1500ms)");
}

TEST(ConfigLoaderTest, ReportsEveryProblemInLineOrder) {
  const std::string yaml =
      "worker:\n"
      "  concurrency: abc\n"  // 2
      "poll:\n"
      "  max_interval: 5x\n"    // 4
      "log: {level: loud}\n"    // 5
      "retry: {jiter: 0.5}\n";  // 6
  try {
    parse_config(yaml, "pgjobd.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    std::vector<std::string> expected = {
        "pgjobd.yaml:2: worker.concurrency: expected a whole number, got 'abc'",
        "pgjobd.yaml:4: poll.max_interval: bad duration '5x' (use 250ms, 5s, 10m, 1h or 7d)",
        "pgjobd.yaml:5: log.level: unknown level 'loud' (use trace, debug, info, warn, error, "
        "critical or off)",
        "pgjobd.yaml:6: retry.jiter: unknown key (did you mean 'jitter'?)",
    };
    EXPECT_EQ(e.problems(), expected);
    EXPECT_EQ(std::string(e.what()),
              expected[0] + "\n" + expected[1] + "\n" + expected[2] + "\n" + expected[3]);
  }
}

TEST(ConfigLoaderTest, UnknownPoolerIsAnErrorNamingTheChoices) {
  EXPECT_EQ(problem("database: {pooler: session}\n"),
            "t.yaml:1: database.pooler: unknown pooler 'session' (use none, or transaction for a "
            "transaction-pooling PgBouncer)");
}

TEST(ConfigLoaderTest, SchedulingIsBatchByDefaultAndAnUnknownPolicyIsAnError) {
  EXPECT_EQ(parse_config("handlers: {a: {builtin: noop}}\n", "t.yaml").worker.scheduling, "batch");
  EXPECT_EQ(problem("worker: {scheduling: fifo}\n"),
            "t.yaml:1: worker.scheduling: unknown policy 'fifo' (use batch, or normal to keep the "
            "policy the daemon was started with)");
}

TEST(ConfigLoaderTest, WrongTypesAreErrors) {
  EXPECT_EQ(problem("database: {url: {host: x}}\n"),
            "t.yaml:1: database.url: expected a string, got a map");
  EXPECT_EQ(problem("worker: {concurrency: [1]}\n"),
            "t.yaml:1: worker.concurrency: expected a whole number, got a list");
  EXPECT_EQ(problem("worker: {concurrency: 1.5}\n"),
            "t.yaml:1: worker.concurrency: expected a whole number, got '1.5'");
  EXPECT_EQ(problem("poll: {listen_notify: maybe}\n"),
            "t.yaml:1: poll.listen_notify: expected true or false, got 'maybe'");
  EXPECT_EQ(problem("retry: {jitter: lots}\n"),
            "t.yaml:1: retry.jitter: expected a number, got 'lots'");
  EXPECT_EQ(problem("poll: 5s\n"), "t.yaml:1: poll: expected a map of keys, got '5s'");
  EXPECT_EQ(problem("database:\n  url:\n"),
            "t.yaml:2: database.url: expected a string, got no value");
  EXPECT_EQ(problem("worker: {concurrency: 99999999999}\n"),
            "t.yaml:1: worker.concurrency: number 99999999999 is too large");
}

TEST(ConfigLoaderTest, IntegersAreDecimal) {
  // yaml-cpp alone would read 010 as octal 8.
  EXPECT_EQ(parse_config("worker: {concurrency: 010}\n", "t.yaml").worker.concurrency, 10);
}

TEST(ConfigLoaderTest, YamlBoolSpellingsAreAccepted) {
  EXPECT_FALSE(parse_config("poll: {listen_notify: no}\n", "t.yaml").poll.listen_notify);
  EXPECT_TRUE(
      parse_config("database: {migrate_on_start: on}\n", "t.yaml").database.migrate_on_start);
}

TEST(ConfigLoaderTest, DuplicateKeyIsAnError) {
  EXPECT_EQ(problem("worker:\n  concurrency: 4\n  concurrency: 8\n"),
            "t.yaml:3: worker.concurrency: duplicate key (first written on line 2)");
}

TEST(ConfigLoaderTest, SyntaxErrorNamesFileAndLine) {
  std::string found = problem("worker:\n  concurrency: 4\n queues: x\n");
  EXPECT_TRUE(found.starts_with("t.yaml:3: YAML syntax error: ")) << found;
  found = problem("worker: {concurrency: 4\n");
  EXPECT_TRUE(found.starts_with("t.yaml:2: YAML syntax error: ")) << found;
}

TEST(ConfigLoaderTest, TopLevelMustBeAMap) {
  EXPECT_EQ(problem("- database\n- worker\n"),
            "t.yaml:1: the top level must be a map of sections (database, worker, ...), got a "
            "list");
  EXPECT_EQ(problem("hello\n"),
            "t.yaml:1: the top level must be a map of sections (database, worker, ...), got "
            "'hello'");
}

TEST(ConfigLoaderTest, SeveralDocumentsAreAnError) {
  EXPECT_TRUE(contains(problem("worker: {}\n---\npoll: {}\n"), "holds 2 YAML documents"));
}

TEST(ConfigLoaderTest, HandlerWithTwoKindsNamesTheHandler) {
  EXPECT_EQ(problem("handlers:\n  ping: {builtin: noop}\n  mixed: {exec: [/bin/true], sql: x}\n"),
            "t.yaml:3: handlers.mixed: has both exec and sql: give exactly one of exec, http, "
            "sql or builtin");
}

TEST(ConfigLoaderTest, HandlerWithoutKindNamesTheHandler) {
  EXPECT_EQ(problem("handlers:\n  lazy: {timeout: 5s}\n"),
            "t.yaml:2: handlers.lazy: no handler kind: give exactly one of exec, http, sql or "
            "builtin");
  EXPECT_EQ(problem("handlers:\n  empty:\n"),
            "t.yaml:2: handlers.empty: no handler kind: give exactly one of exec, http, sql or "
            "builtin");
}

TEST(ConfigLoaderTest, ExecOnlyKeysAreRejectedElsewhere) {
  std::vector<std::string> found = problems(
      "handlers:\n  h:\n    sql: select 1\n    permanent_exit_codes: [3]\n"
      "    kill_grace: 1s\n");
  EXPECT_EQ(found, (std::vector<std::string>{
                       "t.yaml:4: handlers.h.permanent_exit_codes: only valid with exec",
                       "t.yaml:5: handlers.h.kill_grace: only valid with exec"}));
}

TEST(ConfigLoaderTest, HandlerValuesAreChecked) {
  EXPECT_EQ(problem("handlers:\n  h: {exec: []}\n"),
            "t.yaml:2: handlers.h.exec: must list the program and its arguments (no shell)");
  EXPECT_EQ(problem("handlers:\n  h: {exec: /bin/true}\n"),
            "t.yaml:2: handlers.h.exec: expected a list such as [a, b], got '/bin/true'");
  EXPECT_EQ(problem("handlers:\n  h:\n    exec: [/bin/true]\n    permanent_exit_codes: [1, 300]\n"),
            "t.yaml:4: handlers.h.permanent_exit_codes[1]: exit code 300 is outside 1..255");
  EXPECT_EQ(problem("handlers:\n  h:\n    exec:\n      - /bin/true\n      - {a: 1}\n"),
            "t.yaml:5: handlers.h.exec[1]: expected a string, got a map");
  EXPECT_EQ(problem("handlers:\n  h: {http: {url: ftp://x}}\n"),
            "t.yaml:2: handlers.h.http.url: must start with http:// or https://, got 'ftp://x'");
  EXPECT_EQ(problem("handlers:\n  h: {http: {}}\n"),
            "t.yaml:2: handlers.h.http: missing url (the URL the payload is POSTed to)");
  EXPECT_EQ(problem("handlers:\n  h: {http: http://x/}\n"),
            "t.yaml:2: handlers.h.http: expected a map, write http: {url: http://x/}");
  EXPECT_EQ(problem("handlers:\n  h: {sql: \"\"}\n"),
            "t.yaml:2: handlers.h.sql: must not be empty");
  EXPECT_EQ(problem("handlers:\n  h: {sql: \"-- nothing\\n;\"}\n"),
            "t.yaml:2: handlers.h.sql: holds no statement (only comments or ';')");
  EXPECT_EQ(problem("handlers:\n  h:\n    sql: |\n      UPDATE t SET x = 1;\n      COMMIT;\n"),
            "t.yaml:3: handlers.h.sql: holds 2 statements; a handler runs exactly one (found ';' "
            "at line 1 column 19)");
  EXPECT_EQ(problem("handlers:\n  h: {builtin: sleep}\n"),
            "t.yaml:2: handlers.h.builtin: unknown builtin 'sleep' (known: noop)");
}

// handlers.TYPE.dead_letter: the queue may be left out (the dead job's), and the handler's
// own type is allowed (a dead-letter job that dies enqueues nothing: no loop).
TEST(ConfigLoaderTest, DeadLetterNamesATypeAndMaybeAQueue) {
  const Config config =
      parse_config("handlers:\n  a: {builtin: noop, dead_letter: {type: a}}\n", "t.yaml");
  EXPECT_EQ(config.handlers.at("a").dead_letter, (DeadLetterConfig{"a", ""}));
  EXPECT_EQ(problem("handlers:\n  h:\n    builtin: noop\n    dead_letter: {queue: dlq}\n"),
            "t.yaml:4: handlers.h.dead_letter.type: missing (the job type a dead job of this "
            "type enqueues)");
  EXPECT_EQ(problem("handlers:\n  h: {builtin: noop, dead_letter: {type: \"\"}}\n"),
            "t.yaml:2: handlers.h.dead_letter.type: a job type must not be empty");
  EXPECT_EQ(problem("handlers:\n  h: {builtin: noop, dead_letter: {type: x, queue: \"\"}}\n"),
            "t.yaml:2: handlers.h.dead_letter.queue: must not be empty (leave it out for the "
            "dead job's queue)");
  EXPECT_EQ(problem("handlers:\n  h: {builtin: noop, dead_letter: {type: " + std::string(201, 'x') +
                    "}}\n"),
            "t.yaml:2: handlers.h.dead_letter.type: job type is 201 characters, at most 200 are "
            "allowed");
  EXPECT_EQ(problem("handlers:\n  h: {builtin: noop, dead_letter: {type: x, queue: " +
                    std::string(201, 'q') + "}}\n"),
            "t.yaml:2: handlers.h.dead_letter.queue: queue name is 201 bytes, at most 200 are "
            "allowed");
  EXPECT_EQ(problem("handlers:\n  h: {builtin: noop, dead_letter: {type: x, queues: y}}\n"),
            "t.yaml:2: handlers.h.dead_letter.queues: unknown key (did you mean 'queue'?)");
  EXPECT_EQ(problem("handlers:\n  h: {builtin: noop, dead_letter: x}\n"),
            "t.yaml:2: handlers.h.dead_letter: expected a map of keys, got 'x'");
}

TEST(ConfigLoaderTest, SchemaMustBeAPlainIdentifier) {
  EXPECT_EQ(problem("\ndatabase: {schema: 'pub\"lic'}\n"),
            "t.yaml:2: database.schema: 'pub\"lic' is not a plain identifier (letters, digits "
            "and _, not starting with a digit, at most 63 bytes)");
  for (const char* bad : {"''", "1abc", "a-b", "\"a b\"", "café"}) {
    EXPECT_EQ(problems(std::string("database: {schema: ") + bad + "}\n").size(), 1u) << bad;
  }
  EXPECT_EQ(problems("database: {schema: " + std::string(64, 'a') + "}\n").size(), 1u);
  EXPECT_EQ(parse_config("database: {schema: " + std::string(63, 'a') + "}\n", "t").database.schema,
            std::string(63, 'a'));
  EXPECT_EQ(parse_config("database: {schema: _Jobs2}\n", "t").database.schema, "_Jobs2");
}

TEST(ConfigLoaderTest, JobTypesAreAtMost200CharactersAsTheTableAllows) {
  std::string two_hundred;
  for (int i = 0; i < 200; ++i) two_hundred += "é";  // 400 bytes, 200 characters
  EXPECT_EQ(
      parse_config("handlers:\n  " + two_hundred + ": {builtin: noop}\n", "t").handlers.size(), 1u);
  EXPECT_EQ(problem("handlers:\n  " + two_hundred + "x: {builtin: noop}\n"),
            "t.yaml:2: handlers." + two_hundred +
                "x: job type is 201 characters, at most 200 are allowed");
  EXPECT_EQ(problem("worker: {max_payload_bytes: 1023}\n"),
            "t.yaml:1: worker.max_payload_bytes: must be from 1024 to 1073741823 (PostgreSQL's "
            "largest text), got 1023");
}

TEST(ConfigLoaderTest, QueuesReplaceTheDefaultAndMustNotBeEmpty) {
  EXPECT_EQ(problem("worker:\n  queues: {}\n"),
            "t.yaml:2: worker.queues: serve at least one queue");
  EXPECT_EQ(problem("worker:\n  queues:\n"), "t.yaml:2: worker.queues: serve at least one queue");
  EXPECT_EQ(problem("worker:\n  queues:\n    " + std::string(201, 'q') + ": {}\n"),
            "t.yaml:3: worker.queues." + std::string(201, 'q') +
                ": queue name is 201 bytes, at most 200 are allowed");
  EXPECT_EQ(problem("worker:\n  queues:\n    \"\": {}\n"),
            "t.yaml:3: worker.queues.: a queue name must not be empty");
}

TEST(ConfigLoaderTest, ConcurrencyLimits) {
  EXPECT_EQ(problem("worker: {concurrency: 0}\n"),
            "t.yaml:1: worker.concurrency: must be from 1 to 10000, got 0");
  EXPECT_EQ(problem("worker: {concurrency: 10001}\n"),
            "t.yaml:1: worker.concurrency: must be from 1 to 10000, got 10001");
  EXPECT_EQ(problem("worker:\n  concurrency: 4\n  queues:\n    mail: {concurrency: 5}\n"),
            "t.yaml:4: worker.queues.mail.concurrency: must be from 0 (no limit of its own) to "
            "worker.concurrency (4), got 5");
  EXPECT_EQ(problem("worker:\n  queues:\n    mail: {concurrency: -1}\n"),
            "t.yaml:3: worker.queues.mail.concurrency: must be from 0 (no limit of its own) to "
            "worker.concurrency (16), got -1");
}

TEST(ConfigLoaderTest, CrossFieldRulesPointAtAWrittenKey) {
  EXPECT_EQ(problem("poll:\n  min_interval: 10s\n  max_interval: 1s\n"),
            "t.yaml:2: poll.min_interval: poll.min_interval (10s) must not exceed "
            "poll.max_interval (1s)");
  // min_interval keeps its default, so the problem is placed on the key that was written.
  EXPECT_EQ(problem("\npoll: {max_interval: 10ms}\n"),
            "t.yaml:2: poll.max_interval: poll.min_interval (50ms) must not exceed "
            "poll.max_interval (10ms)");
  EXPECT_EQ(problem("poll: {min_interval: 0}\n"),
            "t.yaml:1: poll.min_interval: must be more than 0");
  EXPECT_EQ(problem("retry: {base: 0}\n"), "t.yaml:1: retry.base: must be more than 0");
  EXPECT_EQ(problem("retry: {base: 1m, max_delay: 30s}\n"),
            "t.yaml:1: retry.max_delay: retry.max_delay (30s) must be at least retry.base (1m)");
  EXPECT_EQ(problem("retry: {jitter: 1.5}\n"),
            "t.yaml:1: retry.jitter: must be from 0 to 1, got 1.500000");
  EXPECT_EQ(problem("retry: {jitter: -0.1}\n"),
            "t.yaml:1: retry.jitter: must be from 0 to 1, got -0.100000");
  EXPECT_EQ(problem("lease: {duration: 500ms}\n"),
            "t.yaml:1: lease.duration: must be at least 1s, got 500ms");
  EXPECT_EQ(problem("log: {format: xml}\n"),
            "t.yaml:1: log.format: unknown format 'xml' (use text or json)");
  EXPECT_EQ(problem("database: {url: ''}\n"), "t.yaml:1: database.url: must not be empty");
}

TEST(ConfigLoaderTest, ABadValueDoesNotAlsoFailTheRulesThatReadIt) {
  // max_interval keeps its 5s default when its value is bad; "min_interval (10s) must not
  // exceed max_interval (5s)" would then be a second, misleading report of the same mistake.
  EXPECT_EQ(problem("poll: {min_interval: 10s, max_interval: 5x}\n"),
            "t.yaml:1: poll.max_interval: bad duration '5x' (use 250ms, 5s, 10m, 1h or 7d)");
  EXPECT_EQ(problem("worker:\n  concurrency: lots\n  queues: {mail: {concurrency: 20}}\n"),
            "t.yaml:2: worker.concurrency: expected a whole number, got 'lots'");
}

TEST(ConfigLoaderTest, MetricsListenMustBeHostPort) {
  for (const char* good : {"''", "127.0.0.1:9464", "0.0.0.0:0", "localhost:65535", "'[::]:80'"}) {
    EXPECT_NO_THROW(parse_config(std::string("metrics: {listen: ") + good + "}\n", "t")) << good;
  }
  EXPECT_EQ(problem("metrics: {listen: localhost}\n"),
            "t.yaml:1: metrics.listen: expected host:port such as 127.0.0.1:9464, got "
            "'localhost'");
  EXPECT_EQ(problem("metrics: {listen: 'localhost:65536'}\n"),
            "t.yaml:1: metrics.listen: port must be a number from 0 to 65535, got '65536'");
  EXPECT_EQ(problem("metrics: {listen: ':9464'}\n"),
            "t.yaml:1: metrics.listen: missing host in ':9464' (0.0.0.0:PORT listens everywhere)");
  EXPECT_EQ(problem("metrics: {listen: '::1:9464'}\n"),
            "t.yaml:1: metrics.listen: write an IPv6 host in brackets, e.g. [::1]:9464, not "
            "'::1:9464'");
}

TEST(ConfigValidateTest, AcceptsDefaults) { EXPECT_NO_THROW(validate_config(Config{}, "code")); }

TEST(ConfigValidateTest, WithoutLinesNamesSourceAndKey) {
  Config config;
  config.worker.concurrency = 0;
  config.handlers["odd"].kind = Kind::kSql;
  config.handlers["odd"].sql = "select 1";
  config.handlers["odd"].permanent_exit_codes = {3};
  try {
    validate_config(config, "code");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.problems(), (std::vector<std::string>{
                                "code: worker.concurrency: must be from 1 to 10000, got 0",
                                "code: handlers.odd.permanent_exit_codes: only valid with exec"}));
  }
}

TEST(ConfigEnvTest, DatabaseUrlOverridesPrecedence) {
  EnvGuard guard;
  Config config;
  config.database.url = "postgresql://file/db";
  apply_environment(config);
  EXPECT_EQ(config.database.url, "postgresql://file/db");

  setenv("DATABASE_URL", "postgresql://generic/db", 1);
  apply_environment(config);
  EXPECT_EQ(config.database.url, "postgresql://generic/db");

  setenv("PGJOBD_DATABASE_URL", "postgresql://specific/db", 1);
  apply_environment(config);
  EXPECT_EQ(config.database.url, "postgresql://specific/db");

  // An empty variable counts as unset.
  setenv("PGJOBD_DATABASE_URL", "", 1);
  config.database.url = "postgresql://file/db";
  apply_environment(config);
  EXPECT_EQ(config.database.url, "postgresql://generic/db");

  setenv("DATABASE_URL", "", 1);
  config.database.url = "postgresql://file/db";
  apply_environment(config);
  EXPECT_EQ(config.database.url, "postgresql://file/db");
}

TEST(ConfigEnvTest, ParseConfigIgnoresTheEnvironment) {
  EnvGuard guard;
  setenv("PGJOBD_DATABASE_URL", "postgresql://env/db", 1);
  EXPECT_EQ(parse_config("database: {url: postgresql://file/db}\n", "t").database.url,
            "postgresql://file/db");
}

TEST(ConfigFileTest, LoadConfigReadsTheFileAndAppliesTheEnvironment) {
  EnvGuard guard;
  TempFile file("worker: {concurrency: 3}\ndatabase: {url: postgresql://file/db}\n");
  Config config = load_config(file.path());
  EXPECT_EQ(config.worker.concurrency, 3);
  EXPECT_EQ(config.database.url, "postgresql://file/db");
  setenv("DATABASE_URL", "postgresql://env/db", 1);
  EXPECT_EQ(load_config(file.path()).database.url, "postgresql://env/db");
}

TEST(ConfigFileTest, LoadConfigErrorsNameThePath) {
  TempFile file("\nworker: {concurency: 3}\n");
  try {
    load_config(file.path());
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              file.path() + ":2: worker.concurency: unknown key (did you mean 'concurrency'?)");
  }
}

// YAML's \_ escape (a no-break space) reads, in yaml-cpp, as the single byte 0xA0, not its
// UTF-8: such a string is refused by name, not sent to the database or written back as
// U+FFFD (found by the config fuzzer). Raw bytes that are not UTF-8 likewise.
TEST(ConfigFileTest, AStringThatIsNotUtf8IsRefusedByName) {
  for (const std::string& value : {std::string("\"a\\_b\""), std::string("\"a\xff\"")}) {
    SCOPED_TRACE(value);
    try {
      parse_config("handlers:\n  audit: {sql: " + value + "}\n", "t.yaml");
      FAIL() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("t.yaml:2: handlers.audit.sql: not valid UTF-8"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ConfigFileTest, MissingFileIsAConfigError) {
  try {
    load_config("/nonexistent/pgjobd.yaml");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "/nonexistent/pgjobd.yaml: cannot read: No such file or directory");
  }
}

TEST(ConfigFileTest, DirectoryIsAConfigError) {
  try {
    load_config("/tmp");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "/tmp: cannot read: Is a directory");
  }
}

TEST(ConfigFileTest, ShippedExampleParses) {
  EnvGuard guard;
  Config config = load_config(testing::source_path("config/pgjobd.yaml"));
  EXPECT_EQ(config.database.url, "postgresql://pgjobd@localhost/pgjobd");
  EXPECT_EQ(config.worker.queues.at("mail").concurrency, 4);
  EXPECT_EQ(config.worker.queues.count("default"), 1u);
  ASSERT_EQ(config.handlers.size(), 2u);
  const HandlerConfig& echo = config.handlers.at("echo_job");
  EXPECT_EQ(echo.kind, Kind::kExec);
  EXPECT_EQ(echo.exec_argv, (std::vector<std::string>{"/bin/sh", "-c", "cat > /dev/null"}));
  EXPECT_EQ(echo.timeout, Millis(30'000));
  EXPECT_EQ(echo.permanent_exit_codes, std::vector<int>{65});
  EXPECT_EQ(config.handlers.at("ping").builtin, "noop");
}

// The example documents the defaults: apart from the values it deliberately changes (the
// URL, the extra queue and the handlers) it must equal a default Config.
TEST(ConfigFileTest, ShippedExampleShowsTheDefaults) {
  EnvGuard guard;
  Config config = load_config(testing::source_path("config/pgjobd.yaml"));
  Config defaults;
  EXPECT_EQ(config.database.schema, defaults.database.schema);
  EXPECT_EQ(config.database.migrate_on_start, defaults.database.migrate_on_start);
  EXPECT_EQ(config.database.synchronous_claims, defaults.database.synchronous_claims);
  EXPECT_EQ(config.worker.concurrency, defaults.worker.concurrency);
  EXPECT_EQ(config.poll.min_interval, defaults.poll.min_interval);
  EXPECT_EQ(config.poll.max_interval, defaults.poll.max_interval);
  EXPECT_EQ(config.poll.listen_notify, defaults.poll.listen_notify);
  EXPECT_EQ(config.retry.base, defaults.retry.base);
  EXPECT_EQ(config.retry.max_delay, defaults.retry.max_delay);
  EXPECT_DOUBLE_EQ(config.retry.jitter, defaults.retry.jitter);
  EXPECT_EQ(config.lease.duration, defaults.lease.duration);
  EXPECT_EQ(config.shutdown.timeout, defaults.shutdown.timeout);
  EXPECT_EQ(config.retention.done, defaults.retention.done);
  EXPECT_EQ(config.retention.dead, defaults.retention.dead);
  EXPECT_EQ(config.metrics.listen, defaults.metrics.listen);
  EXPECT_EQ(config.log.level, defaults.log.level);
  EXPECT_EQ(config.log.format, defaults.log.format);
  EXPECT_EQ(config.handlers.at("echo_job").kill_grace, HandlerConfig{}.kill_grace);
}

// Found by tests/fuzz/config_fuzz (corpus/config/nul_in_key.yaml): a key quoted from the
// file with control characters in it (NULs cut what() short) or a newline (which split a
// problem over two lines) is quoted escaped.
TEST(ConfigLoaderTest, ProblemsEscapeControlCharactersQuotedFromTheFile) {
  const std::string yaml("worker: {\"con\\ncur\": 1}\nre\x01try: {}\n");
  try {
    parse_config(yaml, "t.yaml");
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.problems().size(), 2U) << e.what();
    EXPECT_EQ(e.problems()[0].find("t.yaml:1: worker.con\\ncur: unknown key"), 0U) << e.what();
    EXPECT_EQ(e.problems()[1].find("t.yaml:2: re\\x01try: unknown key"), 0U) << e.what();
    EXPECT_EQ(std::string(e.what()), e.problems()[0] + "\n" + e.problems()[1]);
  }
}

// Found by tests/fuzz/config_fuzz (corpus/config/stray_comma.yaml): yaml-cpp 0.7's LoadAll
// never returns on a ',' outside brackets; a reload of such a file would hang the daemon.
TEST(ConfigLoaderTest, StrayCommaIsASyntaxErrorNotAHang) {
  for (const char* yaml : {",\n", ",x\n- a\n", "- a\n,\n"}) {
    const std::vector<std::string> found = problems(yaml);
    ASSERT_EQ(found.size(), 1U) << yaml;
    EXPECT_NE(found[0].find("YAML syntax error"), std::string::npos) << found[0];
  }
}

}  // namespace
}  // namespace pgjobd

namespace pgjobd {
namespace {

TEST(ConfigSqlHandlerTest, OneStatementWithTrailingSemicolonAndQuotedSemicolonsIsAccepted) {
  const std::string yaml =
      "handlers:\n  h:\n    sql: |\n      INSERT INTO log VALUES ($1, ';', $$a;b$$); -- done;\n";
  EXPECT_NO_THROW(parse_config(yaml, "t.yaml"));
}

}  // namespace
}  // namespace pgjobd
