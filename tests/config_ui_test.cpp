// Unit tests for the `ui:` section (README "Dashboard"): its defaults, its keys, and the
// rules that keep a dashboard from being exposed without a login.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "support/config_problems.hpp"

namespace pgjobd {
namespace {

const std::string kHash = "$y$j9T$abcdefghijklmnop$ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef";

using testing::problems_of;

std::string joined(const std::vector<std::string>& problems) {
  std::string text;
  for (const std::string& problem : problems) text += problem + "\n";
  return text;
}

TEST(ConfigUiTest, OffByDefault) {
  const Config config = parse_config("", "t.yaml");
  EXPECT_TRUE(config.ui.listen.empty());
  EXPECT_TRUE(config.ui.show_payloads);
  EXPECT_EQ(config.ui.refresh, Millis(5000));
  EXPECT_EQ(config.ui.session_ttl, Millis(12LL * 3600 * 1000));
  EXPECT_EQ(config.ui.statement_timeout, Millis(2000));
  EXPECT_TRUE(config.ui.users.empty());
}

TEST(ConfigUiTest, ReadsEveryKey) {
  const Config config = parse_config(R"(
ui:
  listen: 0.0.0.0:9465
  show_payloads: false
  refresh: 10s
  session_ttl: 1h
  statement_timeout: 500ms
  users:
    alice: {password_hash: ")" + kHash + R"(", role: operator}
    bob: {password_hash: ")" + kHash + R"(", role: read_only}
)",
                                     "t.yaml");
  EXPECT_EQ(config.ui.listen, "0.0.0.0:9465");
  EXPECT_FALSE(config.ui.show_payloads);
  EXPECT_EQ(config.ui.refresh, Millis(10000));
  EXPECT_EQ(config.ui.session_ttl, Millis(3600000));
  EXPECT_EQ(config.ui.statement_timeout, Millis(500));
  ASSERT_EQ(config.ui.users.size(), 2u);
  EXPECT_EQ(config.ui.users.at("alice").role, "operator");
  EXPECT_EQ(config.ui.users.at("bob").role, "read_only");
  EXPECT_EQ(config.ui.users.at("bob").password_hash, kHash);
}

TEST(ConfigUiTest, LoopbackWithoutUsersIsAllowed) {
  for (const char* listen : {"127.0.0.1:9465", "localhost:0", "[::1]:9465"}) {
    EXPECT_TRUE(problems_of(std::string("ui: {listen: \"") + listen + "\"}\n").empty()) << listen;
  }
}

TEST(ConfigUiTest, NonLoopbackWithoutUsersNamesUiUsers) {
  for (const char* listen : {"0.0.0.0:9465", "10.0.0.5:80", "[::]:9465", "dash.example:9465"}) {
    std::vector<std::string> problems =
        problems_of(std::string("ui:\n  listen: \"") + listen + "\"\n");
    ASSERT_EQ(problems.size(), 1u) << listen << "\n" << joined(problems);
    EXPECT_NE(problems[0].find("ui.users"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find("loopback"), std::string::npos) << problems[0];
  }
}

TEST(ConfigUiTest, BadListenIsReported) {
  std::vector<std::string> problems = problems_of("ui: {listen: nonsense}\n");
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_NE(problems[0].find("ui.listen"), std::string::npos) << problems[0];
}

TEST(ConfigUiTest, UnknownRoleIsReported) {
  std::vector<std::string> problems =
      problems_of("ui:\n  users:\n    alice: {password_hash: \"" + kHash + "\", role: admin}\n");
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_NE(problems[0].find("t.yaml:3: ui.users.alice.role"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("'admin'"), std::string::npos) << problems[0];
}

TEST(ConfigUiTest, PlainPasswordInsteadOfHashIsReported) {
  for (const char* hash : {"hunter2", "", "$y$short", "$y$j9T$has space$abcdefghijk"}) {
    std::vector<std::string> problems =
        problems_of(std::string("ui:\n  users:\n    alice: {password_hash: \"") + hash +
                    "\", role: operator}\n");
    ASSERT_EQ(problems.size(), 1u) << hash << "\n" << joined(problems);
    EXPECT_NE(problems[0].find("ui.users.alice.password_hash"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find("crypt(3)"), std::string::npos) << problems[0];
  }
}

TEST(ConfigUiTest, MissingHashOrRoleIsReported) {
  std::vector<std::string> problems = problems_of("ui:\n  users:\n    alice: {}\n");
  std::string text = joined(problems);
  EXPECT_EQ(problems.size(), 2u) << text;
  EXPECT_NE(text.find("ui.users.alice.password_hash: missing"), std::string::npos) << text;
  EXPECT_NE(text.find("ui.users.alice.role: missing"), std::string::npos) << text;
}

TEST(ConfigUiTest, UnknownUserKeyIsReported) {
  std::vector<std::string> problems = problems_of("ui:\n  users:\n    alice: {password_hash: \"" +
                                                  kHash + "\", role: operator, pw: x}\n");
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_NE(problems[0].find("ui.users.alice.pw"), std::string::npos) << problems[0];
}

TEST(ConfigUiTest, DurationsHaveFloors) {
  std::string text =
      joined(problems_of("ui: {refresh: 100ms, session_ttl: 10s, statement_timeout: 0}\n"));
  EXPECT_NE(text.find("ui.refresh: must be at least 1s"), std::string::npos) << text;
  EXPECT_NE(text.find("ui.session_ttl: must be at least 1m"), std::string::npos) << text;
  EXPECT_NE(text.find("ui.statement_timeout: must be more than 0"), std::string::npos) << text;
}

}  // namespace
}  // namespace pgjobd
