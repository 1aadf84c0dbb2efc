// Bad input through the real binary: a 5 MB payload delivered byte for byte on stdin,
// invalid UTF-8 on a handler's stderr, and queue and type names made of quotes, semicolons,
// $$, backticks, Unicode and 200 bytes: run verbatim, never injected, never lost.

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"
#include "support/test_text.hpp"

namespace pgjobd::testing {
namespace {

std::string without_final_newlines(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

TEST(FaultsInputE2E, FiveMegabytePayloadArrivesByteForByteOnStdin) {
  TestSchema schema;
  TempDir dir;
  const std::string digest = dir.file("digest");
  const std::string size = dir.file("size");
  // Every kind of character JSON treats specially, several byte lengths of UTF-8, and a
  // NUL-free control character.
  const std::string piece =
      "plain ascii, \"quotes\", back\\slash, /slash, tab\t, newline\n, "
      "\x01 control, é ü ß, € ジョブ, 😀 emoji; ";
  std::string blob;
  while (blob.size() < 5 * 1024 * 1024) blob += piece;
  const std::string payload = nlohmann::json{{"blob", blob}, {"n", 1}}.dump();
  ASSERT_GT(payload.size(), 5u * 1024 * 1024);

  DaemonYaml yaml(schema.name());
  yaml.set("worker", "{max_payload_bytes: 8388608}");  // above the 4 MiB default
  const std::string received = dir.file("received");
  yaml.shell_handler("big", "cat > " + shell_quote(received) + "; sha256sum < " +
                                shell_quote(received) + " | cut -d' ' -f1 > " +
                                shell_quote(digest) + "; wc -c < " + shell_quote(received) + " > " +
                                shell_quote(size));
  const std::string id = schema.query("INSERT INTO {jobs} (type, payload) VALUES ('big', " +
                                      sql_literal(payload) + "::jsonb) RETURNING id");
  // Stored verbatim: the string inside is the one we sent.
  EXPECT_EQ(schema.query("SELECT (payload->>'blob') = " + sql_literal(blob) +
                         " FROM {jobs} WHERE id = " + id),
            "t");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 1; }, 30s))
      << schema.query("SELECT status || ' ' || coalesce(last_error, '') FROM {jobs}");
  // Delivered verbatim: the handler read exactly the stored JSON text (payload::text).
  EXPECT_EQ(without_final_newlines(read_text_file(digest)),
            schema.query("SELECT encode(sha256(convert_to(payload::text, 'UTF8')), 'hex') FROM "
                         "{jobs} WHERE id = " +
                         id));
  EXPECT_EQ(without_final_newlines(read_text_file(size)),
            schema.query("SELECT octet_length(payload::text) FROM {jobs} WHERE id = " + id));
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

TEST(FaultsInputE2E, InvalidUtf8OnStderrIsStoredAsValidText) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.shell_handler("garbled", "printf 'bad \\377\\376 bytes \\300\\200 end\\n' >&2; exit 1");
  const std::string id =
      schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES ('garbled', 1) RETURNING id");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 1; }, 20s))
      << schema.query("SELECT status FROM {jobs}") << daemon.log();
  const std::string replacement = "\xEF\xBF\xBD";
  const std::string expected =
      "exit 1: bad " + replacement + replacement + " bytes " + replacement + replacement + " end";
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + id), expected);
  EXPECT_EQ(schema.query("SELECT errors->0->>'error' FROM {jobs} WHERE id = " + id), expected);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);
}

TEST(FaultsInputE2E, HostileQueueAndTypeNamesRunVerbatimAndAreNeverInjected) {
  TestSchema schema;
  TempDir dir;
  const std::string pwned = dir.file("pwned");
  std::string two_hundred_bytes;
  for (int i = 0; i < 100; ++i) two_hundred_bytes += "é";  // 2 bytes each
  // (type, queue) pairs. A shell, SQL or YAML injection would create `pwned`, drop the
  // table or break the config.
  const std::vector<std::pair<std::string, std::string>> names = {
      {"it's; DROP TABLE jobs; --", "q'; DELETE FROM jobs; --"},
      {"$$ $(touch " + pwned + ") `touch " + pwned + "` \"quoted\" \\back",
       "q $$ \"dq\" \\bs $(touch " + pwned + ")"},
      {"résumé-ジョブ-😀", "キュー-😀"},
      {"t" + two_hundred_bytes, std::string(200, 'q')},
      {"{braces}, [brackets]: #hash & *star", "q{a,b}\"c\""},
  };
  DaemonYaml yaml(schema.name());
  std::string queues = "{";
  for (const auto& [type, queue] : names) {
    queues += (queues.size() > 1 ? ", " : "") + yaml_quote(queue) + ": {}";
    yaml.shell_handler(yaml_quote(type),
                       "printf '%s\\n%s\\n' \"$PGJOBD_JOB_TYPE\" \"$PGJOBD_JOB_QUEUE\" > " +
                           shell_quote(dir.path()) + "/got.$PGJOBD_JOB_ID");
  }
  yaml.set("worker", "{concurrency: 4, queues: " + queues + "}}")
      .set("metrics", "{listen: \"127.0.0.1:0\"}");
  const std::string config = dir.write("pgjobd.yaml", yaml.text());
  const CliResult check = run_cli({"check-config", "-c", config});
  ASSERT_EQ(check.exit_code, 0) << check.out << check.err << yaml.text();

  std::vector<std::string> ids;
  for (const auto& [type, queue] : names) {
    ids.push_back(schema.query("INSERT INTO {jobs} (type, queue) VALUES (" + sql_literal(type) +
                               ", " + sql_literal(queue) + ") RETURNING id"));
  }
  // The CLI takes them as plain arguments too.
  const CliResult enqueued = run_cli(
      {"enqueue", "-c", config, names[1].first, "{\"via\": \"cli\"}", "--queue", names[1].second});
  ASSERT_EQ(enqueued.exit_code, 0) << enqueued.err;
  ids.push_back(without_final_newlines(enqueued.out));
  std::vector<std::pair<std::string, std::string>> expected = names;
  expected.push_back(names[1]);

  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  ASSERT_TRUE(wait_until(
      [&] { return schema.count("status = 'done'") == static_cast<std::int64_t>(ids.size()); },
      20s))
      << schema.query("SELECT string_agg(status, ',') FROM {jobs}") << daemon.log();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(read_text_file(dir.file("got." + ids[i])),
              expected[i].first + "\n" + expected[i].second + "\n")
        << "job " << ids[i];
    EXPECT_EQ(schema.query("SELECT type = " + sql_literal(expected[i].first) + " AND queue = " +
                           sql_literal(expected[i].second) + " FROM {jobs} WHERE id = " + ids[i]),
              "t");
  }
  EXPECT_FALSE(std::filesystem::exists(pwned)) << "a name was run as a shell command";
  // The names reach /metrics as escaped label values, and the exposition stays parseable.
  const HttpResponse metrics = http_get(daemon.metrics_port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("type=\"$$ $(touch " + pwned + ") `touch " + pwned +
                              "` \\\"quoted\\\" \\\\back\""),
            std::string::npos)
      << metrics.body.substr(0, 3000);
  EXPECT_EQ(schema.count(), static_cast<std::int64_t>(ids.size()));
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0);

  // One byte more than a queue name may have: a clear error naming the key, not a crash.
  DaemonYaml too_long(schema.name());
  too_long.set("worker", "{queues: {" + std::string(201, 'q') + ": {}}}")
      .handler("ping", "{builtin: noop}");
  const CliResult rejected =
      run_cli({"check-config", "-c", dir.write("too-long.yaml", too_long.text())});
  EXPECT_EQ(rejected.exit_code, 2);
  EXPECT_NE(rejected.err.find("worker.queues." + std::string(201, 'q')), std::string::npos)
      << rejected.err;
  EXPECT_NE(rejected.err.find("queue name is 201 bytes, at most 200 are allowed"),
            std::string::npos)
      << rejected.err;
}

}  // namespace
}  // namespace pgjobd::testing
