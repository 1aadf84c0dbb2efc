// The database password never leaves the daemon: candidates from every conninfo form,
// scrubbing, and real libpq errors for malformed conninfo strings.

#include "log/secrets.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "db/connection.hpp"
#include "log/logging.hpp"
#include "support/log_capture.hpp"

namespace pgjobd {
namespace {

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

TEST(ConninfoPasswords, UrlUserinfoRawAndDecoded) {
  const auto found = conninfo_passwords("postgresql://app:s%40cret%2Fx@db.example:5432/jobs");
  EXPECT_TRUE(has(found, "s%40cret%2Fx"));
  EXPECT_TRUE(has(found, "s@cret/x"));
}

TEST(ConninfoPasswords, MalformedPercentTokenIsKeptRaw) {
  const auto found = conninfo_passwords("postgresql://u:50%offnow@h/db");
  EXPECT_TRUE(has(found, "50%offnow"));
}

TEST(ConninfoPasswords, UnencodedAtSignTakesTheTextUpToTheLastAt) {
  const auto found = conninfo_passwords("postgresql://u:p@ss@word@h/db");
  EXPECT_TRUE(has(found, "p@ss@word"));
}

TEST(ConninfoPasswords, QueryParameter) {
  const auto found = conninfo_passwords("postgresql://h/db?user=a&password=qu%65ry99&sslmode=x");
  EXPECT_TRUE(has(found, "qu%65ry99"));
  EXPECT_TRUE(has(found, "query99"));
}

TEST(ConninfoPasswords, KeyValueQuotedWithEscapes) {
  const auto found = conninfo_passwords(R"(host=db password = 'it\'s a s\\ecret' dbname=jobs)");
  EXPECT_TRUE(has(found, R"(it\'s a s\\ecret)"));
  EXPECT_TRUE(has(found, R"(it's a s\ecret)"));
}

TEST(ConninfoPasswords, KeyValueUnterminatedQuoteTakesTheRest) {
  const auto found = conninfo_passwords("host=db password='never closed");
  EXPECT_TRUE(has(found, "never closed"));
}

TEST(ConninfoPasswords, KeyValueUnquotedWordsUpToTheNextEntry) {
  const auto found = conninfo_passwords("password=two words here host=db");
  EXPECT_TRUE(has(found, "two"));
  EXPECT_TRUE(has(found, "two words here"));
  EXPECT_TRUE(has(found, "words"));
}

TEST(ConninfoPasswords, NoneWithoutAPassword) {
  EXPECT_TRUE(conninfo_passwords("postgresql://app@host:5432/db").empty());
  EXPECT_TRUE(conninfo_passwords("postgresql://host:5432/db?x=a@b").empty());
  EXPECT_TRUE(conninfo_passwords("host=db user=app dbname=jobs").empty());
}

// The demo's postgresql://pgjobd:pgjobd@db/pgjobd: the user name is shown wherever the
// masked URL is, so scrubbing "pgjobd" could hide nothing and would garble every line.
TEST(ConninfoPasswords, NoneWhenThePasswordIsAlsoAVisiblePart) {
  EXPECT_TRUE(conninfo_passwords("postgresql://pgjobd:pgjobd@postgres/pgjobd").empty());
  EXPECT_TRUE(conninfo_password_candidates("postgresql://pgjobd:pgjobd@postgres/pgjobd").empty());
  EXPECT_TRUE(conninfo_passwords("host=db user=jobs password=jobs").empty());
  EXPECT_TRUE(has(conninfo_passwords("postgresql://pgjobd:pgjobd2@postgres/pgjobd"), "pgjobd2"));
}

TEST(ConninfoPasswordCandidates, IncludePiecesBetweenUrlDelimiters) {
  const auto found = conninfo_password_candidates("postgresql://u:first/second@h/db");
  EXPECT_TRUE(has(found, "first/second"));
  EXPECT_TRUE(has(found, "first"));
  EXPECT_TRUE(has(found, "second"));
}

TEST(ScrubSecrets, ReplacesEveryOccurrenceLongestFirst) {
  EXPECT_EQ(scrub_secrets("a secret and secret-2 again", {"secret", "secret-2"}),
            "a *** and *** again");
  EXPECT_EQ(scrub_secrets("nothing here", {"secret"}), "nothing here");
}

TEST(ProcessSecrets, ScrubbedFromMaskedText) {
  add_process_secrets({"process-wide-Secret"});
  EXPECT_EQ(scrub_process_secrets("x process-wide-Secret y"), "x *** y");
  EXPECT_EQ(mask_password("error: process-wide-Secret"), "error: ***");
}

// libpq fails while parsing each of these, so no server is needed. Each case names the
// password (and any piece of it libpq could quote) that must appear nowhere.
struct MalformedCase {
  const char* conninfo;
  std::vector<std::string> secret_texts;
};

class MalformedConninfo : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedConninfo, PasswordAbsentFromErrorAndLog) {
  const MalformedCase& param = GetParam();
  DatabaseConfig config;
  config.url = param.conninfo;
  pgjobd::testing::LogCapture log;
  std::string message;
  try {
    open_connection(config, "test");
    FAIL() << "connected with " << param.conninfo;
  } catch (const std::exception& e) {
    message = e.what();
  }
  // What the daemon does with such an error: log it, with the conninfo masked.
  spdlog::error("cannot connect to {}: {}", mask_password(config.url), message);
  EXPECT_FALSE(message.empty());
  for (const std::string& secret : param.secret_texts) {
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
    EXPECT_FALSE(log.contains(secret)) << log.all();
  }
}

INSTANTIATE_TEST_SUITE_P(
    LibpqParseErrors, MalformedConninfo,
    ::testing::Values(
        // invalid percent-encoded token: "50%offhunter"
        MalformedCase{"postgresql://u:50%offhunter@localhost/db", {"50%offhunter", "offhunter"}},
        MalformedCase{"postgresql://localhost/db?password=50%zzhunter", {"50%zzhunter"}},
        // invalid port: with a '/' in the password libpq reads "u" as host, "hunter" as port
        MalformedCase{"postgresql://u:hunter/22secret@localhost/db", {"hunter", "22secret"}},
        MalformedCase{"postgresql://u:hunter22@localhost:notaport/db", {"hunter22"}},
        // invalid URI query parameter
        MalformedCase{"postgresql://u:hunter22@localhost/db?bogus=1", {"hunter22"}},
        MalformedCase{"postgresql://localhost/db?password=hunter22&bogus=1", {"hunter22"}},
        // invalid value of a known parameter
        MalformedCase{"postgresql://u:hunter22@localhost/db?sslmode=bogus", {"hunter22"}},
        // invalid IPv6 host: libpq quotes the whole URI
        MalformedCase{"postgresql://u:hunter22@[::1/db", {"hunter22"}},
        MalformedCase{"postgresql://u:hunter22@[]/db", {"hunter22"}},
        MalformedCase{"postgresql://u:hunter22@[::1]x/db", {"hunter22"}},
        MalformedCase{"postgresql://u:hun%74er22@[::1/db", {"hun%74er22", "hunter22"}},
        // key=value: unterminated quoted string, missing "=", unknown option, bad port
        MalformedCase{"host=localhost password='hunter22 never closed",
                      {"hunter22", "never closed"}},
        MalformedCase{R"(host=localhost password='hun\'ter22)", {R"(hun\'ter22)", "hun'ter22"}},
        MalformedCase{"host=localhost password=two hunterwords dbname=db", {"hunterwords"}},
        MalformedCase{"host=localhost bogus=1 password=hunter22", {"hunter22"}},
        MalformedCase{"host=localhost port=notaport password=hunter22", {"hunter22"}},
        // a URL inside dbname= is expanded by libpq, and its errors quote it
        MalformedCase{"dbname=postgresql://u:hunter22@[::1/db", {"hunter22"}}));

}  // namespace
}  // namespace pgjobd
