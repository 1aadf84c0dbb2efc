// End-to-end: the daemon's log output: JSON lines with job fields, and database passwords
// masked everywhere they could be printed.

#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Every line is a JSON object with string ts, level and msg; returns them parsed.
std::vector<nlohmann::json> parse_json_log(const std::string& log) {
  // As log.level spells them: `warn`, not spdlog's `warning`.
  static const std::set<std::string> kLevels = {"trace", "debug", "info",
                                                "warn",  "error", "critical"};
  std::vector<nlohmann::json> entries;
  for (const std::string& line : lines_of(log)) {
    nlohmann::json entry;
    try {
      entry = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << "log line is not JSON (" << e.what() << "): " << line;
      continue;
    }
    EXPECT_TRUE(entry.is_object()) << line;
    if (!entry.is_object()) continue;
    EXPECT_TRUE(entry.contains("ts") && entry["ts"].is_string()) << line;
    EXPECT_TRUE(entry.contains("level") && entry["level"].is_string() &&
                kLevels.contains(entry["level"].get<std::string>()))
        << line;
    EXPECT_TRUE(entry.contains("msg") && entry["msg"].is_string()) << line;
    entries.push_back(std::move(entry));
  }
  return entries;
}

const nlohmann::json* find_entry(const std::vector<nlohmann::json>& entries,
                                 const std::string& msg_part) {
  for (const auto& entry : entries) {
    if (entry.value("msg", "").find(msg_part) != std::string::npos) return &entry;
  }
  return nullptr;
}

TEST(LogsE2E, JsonFormatIsOneObjectPerLineWithJobFields) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("log", "{level: debug, format: json}")
      .shell_handler("fine", "echo all good")
      .shell_handler("broken", "echo \"it \\\"broke\\\"\tbadly\" >&2; exit 3");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.insert_jobs("fine", 3);
  const std::string id =
      schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES ('broken', 2) RETURNING id");
  ASSERT_TRUE(wait_until(
      [&] { return schema.count("status = 'done'") == 3 && schema.count("status = 'dead'") == 1; },
      15s));
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_for_exit(10s), 0);

  const std::string log = daemon.log();
  const std::vector<nlohmann::json> entries = parse_json_log(log);
  EXPECT_GE(entries.size(), 8u) << log;
  EXPECT_TRUE(daemon.output().empty()) << "logs go to stderr only: " << daemon.output();

  const nlohmann::json* failed = find_entry(entries, "failed (attempt 1 of 2)");
  ASSERT_NE(failed, nullptr) << log;
  EXPECT_EQ(failed->value("level", ""), "warn");
  EXPECT_EQ(failed->value("job_id", nlohmann::json()), std::stoll(id)) << failed->dump();
  EXPECT_EQ(failed->value("attempt", nlohmann::json()), 1) << failed->dump();

  const nlohmann::json* dead = find_entry(entries, "dead after attempt 2");
  ASSERT_NE(dead, nullptr) << log;
  EXPECT_EQ(dead->value("job_id", nlohmann::json()), std::stoll(id)) << dead->dump();
  EXPECT_EQ(dead->value("type", nlohmann::json()), "broken") << dead->dump();
  EXPECT_EQ(dead->value("queue", nlohmann::json()), "default") << dead->dump();
  EXPECT_EQ(dead->value("attempt", nlohmann::json()), 2) << dead->dump();
  ASSERT_TRUE(dead->contains("duration_ms") && (*dead)["duration_ms"].is_number()) << dead->dump();
  EXPECT_GE((*dead)["duration_ms"].get<double>(), 0.0);
  for (const auto& entry : entries) {
    for (const char* field : {"ts", "level", "msg"}) {
      EXPECT_TRUE(entry.contains(field)) << field << " missing: " << entry.dump();
    }
  }
  const std::string error = dead->value("error", "");
  EXPECT_NE(error.find("exit 3"), std::string::npos) << dead->dump();
  EXPECT_NE(error.find("it \"broke\"\tbadly"), std::string::npos) << dead->dump();
}

// A handler's stderr is arbitrary bytes; the JSON log must stay parseable whatever it wrote.
TEST(LogsE2E, JsonLogStaysValidWhenAHandlerWritesInvalidUtf8) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("log", "{format: json}")
      .shell_handler("binary", "printf 'bad bytes: \\377\\376 \\300\\n' >&2; exit 3");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.exec("INSERT INTO {jobs} (type, max_attempts) VALUES ('binary', 1)");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'dead'") == 1; }, 15s));
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_for_exit(10s), 0);

  const std::vector<nlohmann::json> entries = parse_json_log(daemon.log());
  EXPECT_NE(find_entry(entries, "dead after attempt 1"), nullptr) << daemon.log();
  // The stored error was sanitised for PostgreSQL; the log line should be too.
  EXPECT_NE(schema.query("SELECT last_error FROM {jobs}").find("bad bytes"), std::string::npos);
}

// postgresql://user@host... → postgresql://user:SECRET@host...; "" when the test URL has no
// user to attach a password to.
std::string url_with_password(const std::string& url, const std::string& secret) {
  const auto scheme = url.find("://");
  const auto at = url.find('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return "";
  const std::string user = url.substr(scheme + 3, at - scheme - 3);
  if (user.empty() || user.find(':') != std::string::npos) return "";
  return url.substr(0, at) + ":" + secret + url.substr(at);
}

constexpr const char* kSecret = "s3cretPassw0rd";

TEST(LogsE2E, DatabasePasswordNeverAppearsInTheLog) {
  const std::string url = url_with_password(test_database_url(), kSecret);
  if (url.empty())
    GTEST_SKIP() << "PGJOBD_TEST_DATABASE_URL has no user@ part to add a password to";
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  // Trust authentication ignores the password, so the daemon works normally.
  yaml.set("database", "{url: " + yaml_quote(url) + ", schema: " + schema.name() + "}")
      .set("log", "{level: debug}")
      .handler("ping", "{builtin: noop}")
      .shell_handler("fail", "exit 1");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.insert_jobs("ping", 3);
  schema.exec("INSERT INTO {jobs} (type, max_attempts) VALUES ('fail', 1)");
  ASSERT_TRUE(wait_until([&] { return schema.count("status IN ('done', 'dead')") == 4; }, 15s));
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_for_exit(10s), 0);
  EXPECT_EQ(daemon.log().find(kSecret), std::string::npos) << daemon.log();
  // The database is named by its parsed fields, not by the URL.
  EXPECT_NE(daemon.log().find(" dbname="), std::string::npos) << daemon.log();

  const CliResult check = run_cli({"check-config", "-c", daemon.config_path()});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_EQ((check.out + check.err).find(kSecret), std::string::npos) << check.out << check.err;
  EXPECT_NE(check.out.find(" dbname="), std::string::npos) << check.out;
}

TEST(LogsE2E, PasswordIsMaskedInConnectionErrors) {
  const std::string secret = kSecret;
  TempDir dir;
  for (const std::string& url :
       {"postgresql://pgjobd:" + secret + "@127.0.0.1:1/pgjobd?connect_timeout=2",
        "postgresql://pgjobd@127.0.0.1:1/pgjobd?password=" + secret + "&connect_timeout=2",
        "host=127.0.0.1 port=1 dbname=pgjobd user=pgjobd password=" + secret +
            " connect_timeout=2"}) {
    SCOPED_TRACE(url);
    const std::string file = dir.write(
        "pgjobd.yaml", "database: {url: " + yaml_quote(url) +
                           "}\nmetrics: {listen: \"\"}\nhandlers:\n  ping: {builtin: noop}\n");
    for (const char* command : {"migrate", "stats", "check-config"}) {
      SCOPED_TRACE(command);
      const CliResult result = run_cli({command, "-c", file});
      EXPECT_EQ(result.exit_code, std::string(command) == "check-config" ? 0 : 1) << result.err;
      EXPECT_EQ((result.out + result.err).find(secret), std::string::npos)
          << result.out << result.err;
      EXPECT_NE((result.out + result.err).find("host=127.0.0.1 port=1 dbname=pgjobd user=pgjobd"),
                std::string::npos)
          << result.out << result.err;
    }
  }
}

TEST(LogsE2E, DaemonWaitingForTheDatabaseMasksThePasswordAndStopsOnSigterm) {
  const std::string url =
      "postgresql://pgjobd:" + std::string(kSecret) + "@127.0.0.1:1/pgjobd?connect_timeout=2";
  DaemonYaml yaml("public");
  yaml.set("database", "{url: " + yaml_quote(url) + "}").handler("ping", "{builtin: noop}");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_for_log("database not reachable")) << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(10s), 0) << daemon.log();
  EXPECT_EQ(daemon.log().find(kSecret), std::string::npos) << daemon.log();
  EXPECT_NE(daemon.log().find("host=127.0.0.1 port=1 dbname=pgjobd user=pgjobd"), std::string::npos)
      << daemon.log();
}

}  // namespace
}  // namespace pgjobd::testing
