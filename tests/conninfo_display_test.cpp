// describe_conninfo: a configured database URL is shown by its parsed host, port, database
// and user, and a malformed one by libpq's message without the fragments it quotes.

#include "log/conninfo_display.hpp"

#include <gtest/gtest.h>

#include <string>

#include "support/test_text.hpp"

namespace pgjobd {
namespace {

using testing::contains;

TEST(DescribeConninfo, ShowsTheParsedFieldsOnly) {
  EXPECT_EQ(describe_conninfo("postgresql://app:s3cretpw@db.example:5433/jobs?sslmode=require"),
            "host=db.example port=5433 dbname=jobs user=app");
  EXPECT_EQ(describe_conninfo("host=db user=app password=s3cretpw dbname=jobs"),
            "host=db dbname=jobs user=app");
  EXPECT_EQ(describe_conninfo("postgresql://db/jobs?user=app&password=s3cretpw"),
            "host=db dbname=jobs user=app");
  EXPECT_EQ(describe_conninfo(""), "libpq defaults");
  EXPECT_EQ(describe_conninfo("host=a,b port=1,2"), "host=a,b port=1,2");
}

TEST(DescribeConninfo, MalformedNeverShowsTheText) {
  struct Case {
    const char* conninfo;
    const char* secret;
    const char* message;  // part of what libpq says, quoted keywords kept
  };
  const Case cases[] = {
      // The line: a missing '=' after the keyword.
      {"host=db user=bob password s3cr3tpw", "s3cr3tpw", "missing \"=\" after \"password\""},
      // A missing '=' after the password itself: libpq quotes it.
      {"host=db user=bob s3cr3tpw", "s3cr3tpw", "missing \"=\" after \"…\""},
      {"host=db password='s3cr3t pw", "s3cr3t pw", "unterminated quoted string"},
      {"postgresql://bob:50%zzs3cr3tpw@db/jobs", "s3cr3tpw", "invalid percent-encoded token"},
      {"postgresql://db/jobs?password=s3cr3tpw&s3cr3tpw2", "s3cr3tpw", "separator"},
      {"postgresql://db/jobs?passwd=s3cr3tpw", "s3cr3tpw", "invalid URI query parameter: \"…\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.conninfo);
    const std::string shown = describe_conninfo(c.conninfo);
    EXPECT_TRUE(shown.starts_with("a malformed conninfo (libpq: ")) << shown;
    EXPECT_TRUE(contains(shown, c.message)) << shown;
    EXPECT_FALSE(contains(shown, c.secret)) << shown;
    EXPECT_FALSE(contains(shown, c.conninfo)) << shown;
    EXPECT_FALSE(conninfo_parses(c.conninfo));
  }
  EXPECT_TRUE(conninfo_parses("host=db"));
}

}  // namespace
}  // namespace pgjobd
