// The database password stays inside the daemon when its conninfo is malformed: libpq's
// errors quote pieces of such a conninfo, and the daemon logs them and shows them on
// /readyz while it waits for the database.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

struct MalformedDatabase {
  const char* name;
  std::string url;  // database.url, from the file or from DATABASE_URL
  bool from_environment;
  std::vector<std::string> secrets;  // the password and the pieces libpq could quote
};

class SecretsE2E : public ::testing::TestWithParam<MalformedDatabase> {};

TEST_P(SecretsE2E, PasswordNeverInLogOrReadyz) {
  const MalformedDatabase& param = GetParam();
  DaemonYaml yaml("unused");
  yaml.set("metrics", "{listen: \"127.0.0.1:0\"}").handler("ping", "{builtin: noop}");
  EnvOverrides env;
  if (param.from_environment) {
    env.emplace_back("DATABASE_URL", param.url);
  } else {
    yaml.set("database", "{url: " + yaml_quote(param.url) + "}");
  }
  DaemonProcess daemon(yaml.text(), {"run"}, env);
  const int port = daemon.metrics_port();
  ASSERT_NE(port, 0) << daemon.log();
  // The second attempt's warning: the first one is long logged, and /readyz has its reason.
  ASSERT_TRUE(daemon.wait_for_log("database not reachable (attempt 2)")) << daemon.log();
  const HttpResponse readyz = http_get(port, "/readyz");
  EXPECT_EQ(readyz.status, 503);
  EXPECT_NE(readyz.body.find("database not reachable"), std::string::npos) << readyz.body;
  const std::string log = daemon.log();
  // The start line names the conninfo by what libpq parsed, or says it is malformed.
  EXPECT_NE(log.find("on a malformed conninfo (libpq: "), std::string::npos) << log;
  EXPECT_EQ(log.find(param.url), std::string::npos) << log;
  for (const std::string& secret : param.secrets) {
    EXPECT_EQ(readyz.body.find(secret), std::string::npos) << readyz.body;
    EXPECT_EQ(log.find(secret), std::string::npos) << log;
  }

  // The commands that name the database: check-config's summary, a subcommand's error.
  TempDir dir;
  const std::string file = dir.write("pgjobd.yaml", yaml.text());
  for (const std::vector<std::string>& args : {std::vector<std::string>{"check-config", "-c", file},
                                               std::vector<std::string>{"stats", "-c", file}}) {
    SCOPED_TRACE(args[0]);
    const CliResult result = run_cli(args, env);
    const std::string output = result.out + result.err;
    EXPECT_NE(output.find("a malformed conninfo (libpq: "), std::string::npos) << output;
    EXPECT_EQ(output.find(param.url), std::string::npos) << output;
    for (const std::string& secret : param.secrets) {
      EXPECT_EQ(output.find(secret), std::string::npos) << output;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    MalformedConninfo, SecretsE2E,
    ::testing::Values(
        MalformedDatabase{"PercentToken",
                          "postgresql://u:50%offhunter@localhost/db",
                          false,
                          {"50%offhunter", "offhunter"}},
        MalformedDatabase{
            "IPv6HostFromEnvironment", "postgresql://u:hunter22x@[::1/db", true, {"hunter22x"}},
        MalformedDatabase{"UnterminatedQuote",
                          "host=localhost password='hunter22x never closed",
                          false,
                          {"hunter22x", "never closed"}},
        // The forms no pattern recognises as a password: only what libpq
        // parsed may be printed, never the text.
        MalformedDatabase{
            "MissingEquals", "host=localhost user=bob password s3cr3tpwA", false, {"s3cr3tpwA"}},
        MalformedDatabase{"MissingEqualsAfterPassword",
                          "host=localhost user=bob s3cr3tpwB dbname=x",
                          false,
                          {"s3cr3tpwB"}},
        MalformedDatabase{"QuotedThenStray",
                          "host=localhost password='s3cr3t pwC' user=bob stray",
                          false,
                          {"s3cr3t pwC", "s3cr3t", "pwC"}},
        MalformedDatabase{"BadPercentInUserinfo",
                          "postgresql://bob:s3cr3tpwD%zz@localhost/db",
                          true,
                          {"s3cr3tpwD"}},
        MalformedDatabase{"PasswordInQueryString",
                          "postgresql://localhost/db?user=bob&password=s3cr3tpwE&x",
                          false,
                          {"s3cr3tpwE"}}),
    [](const auto& test) { return std::string(test.param.name); });

}  // namespace
}  // namespace pgjobd::testing
