// What an exec child's environment leaves out: the daemon's database credentials in every
// form, and its control channels; what it keeps: everything else, DATABASE_URL included
// when it is the application's own.

#include "handlers/exec_environment.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace pgjobd {
namespace {

// A null-terminated environ-style array over `entries`.
class Env {
 public:
  explicit Env(std::vector<std::string> entries) : entries_(std::move(entries)) {
    for (const std::string& entry : entries_) pointers_.push_back(entry.c_str());
    pointers_.push_back(nullptr);
  }
  const char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<const char*> pointers_;
};

Job job() {
  Job j;
  j.id = 7;
  j.type = "report";
  j.queue = "default";
  j.attempt = 1;
  return j;
}

std::vector<std::string> child_env(const std::string& database_url, const Env& env) {
  return build_child_environment(job(), credentials_to_withhold(database_url, env.get()),
                                 env.get());
}

bool has_name(const std::vector<std::string>& environment, const std::string& name) {
  return std::any_of(environment.begin(), environment.end(),
                     [&](const std::string& entry) { return entry.rfind(name + "=", 0) == 0; });
}

bool mentions(const std::vector<std::string>& environment, const std::string& text) {
  return std::any_of(environment.begin(), environment.end(), [&](const std::string& entry) {
    return entry.find(text) != std::string::npos;
  });
}

TEST(ExecEnvironment, DatabaseUrlThatGaveTheDaemonItsCredentialsIsWithheld) {
  const std::string url = "postgresql://daemon:Daemon-Pw1@db/jobs";
  const Env env({"DATABASE_URL=" + url, "HOME=/home/app"});
  const auto environment = child_env(url, env);
  EXPECT_FALSE(has_name(environment, "DATABASE_URL"));
  EXPECT_FALSE(mentions(environment, "Daemon-Pw1"));
  EXPECT_TRUE(has_name(environment, "HOME"));
  EXPECT_TRUE(has_name(environment, "PGJOBD_JOB_ID"));
}

TEST(ExecEnvironment, DatabaseUrlWithoutAPasswordIsWithheldWhenItIsTheDaemons) {
  // Peer or .pgpass authentication: no password, but still the daemon's own database.
  const std::string url = "postgresql:///jobs";
  const Env env({"DATABASE_URL=" + url});
  EXPECT_FALSE(has_name(child_env(url, env), "DATABASE_URL"));
}

TEST(ExecEnvironment, ApplicationsDatabaseUrlIsPassedWhenPgjobdHasItsOwn) {
  const std::string own = "postgresql://daemon:Daemon-Pw1@db/jobs";
  const Env env({"PGJOBD_DATABASE_URL=" + own, "DATABASE_URL=postgresql://app:App-Pw2@db/app"});
  const auto environment = child_env(own, env);
  EXPECT_FALSE(has_name(environment, "PGJOBD_DATABASE_URL"));
  ASSERT_TRUE(has_name(environment, "DATABASE_URL"));
  EXPECT_TRUE(mentions(environment, "App-Pw2"));
  EXPECT_FALSE(mentions(environment, "Daemon-Pw1"));
}

TEST(ExecEnvironment, ApplicationsDatabaseUrlIsPassedWhenTheFileGaveTheDaemonsUrl) {
  const Env env({"DATABASE_URL=postgresql://app:App-Pw2@db/app"});
  const auto environment = child_env("postgresql://daemon:Daemon-Pw1@db/jobs", env);
  EXPECT_TRUE(has_name(environment, "DATABASE_URL"));
}

TEST(ExecEnvironment, AnyVariableHoldingThePasswordIsWithheld) {
  const std::string url = "postgresql://daemon:p%40ss-Word9@db/jobs";
  const Env env({"APP_DSN=host=db password=p@ss-Word9", "RAW=x:p%40ss-Word9@y",
                 "DATABASE_URL=postgresql://daemon:p%40ss-Word9@db/other", "KEEP=1"});
  const auto environment = child_env(url, env);
  EXPECT_FALSE(has_name(environment, "APP_DSN"));  // decoded form
  EXPECT_FALSE(has_name(environment, "RAW"));      // encoded form
  EXPECT_FALSE(has_name(environment, "DATABASE_URL"));
  EXPECT_TRUE(has_name(environment, "KEEP"));
}

TEST(ExecEnvironment, KeyValueConninfoPasswordIsWithheld) {
  const std::string url = "host=db password='s3cret value' dbname=jobs";
  const Env env({"COPY=s3cret value", "KEEP=s3cret"});
  const auto environment = child_env(url, env);
  EXPECT_FALSE(has_name(environment, "COPY"));
  EXPECT_TRUE(has_name(environment, "KEEP"));
}

TEST(ExecEnvironment, PgpasswordIsWithheldWhenTheDaemonUsesIt) {
  const Env env({"PGPASSWORD=From-Env-7", "OTHER=uses From-Env-7"});
  const auto environment = child_env("postgresql://daemon@db/jobs", env);
  EXPECT_FALSE(has_name(environment, "PGPASSWORD"));
  EXPECT_FALSE(has_name(environment, "OTHER"));
}

TEST(ExecEnvironment, PgpasswordIsPassedWhenTheConninfoHasItsOwnPassword) {
  const Env env({"PGPASSWORD=Apps-Own-7"});
  const auto environment = child_env("postgresql://daemon:Daemon-Pw1@db/jobs", env);
  EXPECT_TRUE(has_name(environment, "PGPASSWORD"));
}

TEST(ExecEnvironment, ControlChannelsAndStaleJobVariablesAreReplaced) {
  const Env env({"NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=1", "WATCHDOG_PID=2",
                 "PGJOBD_JOB_ID=stale"});
  const auto environment = child_env("postgresql:///jobs", env);
  EXPECT_FALSE(has_name(environment, "NOTIFY_SOCKET"));
  EXPECT_FALSE(has_name(environment, "WATCHDOG_USEC"));
  EXPECT_FALSE(has_name(environment, "WATCHDOG_PID"));
  EXPECT_EQ(std::count(environment.begin(), environment.end(), "PGJOBD_JOB_ID=7"), 1);
  EXPECT_FALSE(mentions(environment, "stale"));
}

}  // namespace
}  // namespace pgjobd
