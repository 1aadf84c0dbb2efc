// `pgjobd ui-passwd --password-stdin` (src/cli/ui_commands.cpp): the hash it prints
// verifies against the password it read, and an empty password is refused.
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>
#include <string>

#include "cli/commands.hpp"
#include "ui/auth.hpp"

namespace pgjobd {
namespace {

struct PasswdRun {
  int code;
  std::string out;
};

// Runs the command with `input` as stdin, capturing stdout and muting stderr.
PasswdRun run_passwd(const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out, err;
  std::streambuf* old_in = std::cin.rdbuf(in.rdbuf());
  std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
  const int code = run_ui_passwd(true);
  std::cin.rdbuf(old_in);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  return {code, out.str()};
}

TEST(UiPasswdTest, PrintsAYescryptHashOfTheFirstLine) {
  const PasswdRun run = run_passwd("s3cret pass\nignored second line\n");
  ASSERT_EQ(run.code, kExitOk);
  ASSERT_TRUE(run.out.ends_with("\n")) << run.out;
  const std::string hash = run.out.substr(0, run.out.size() - 1);
  EXPECT_TRUE(hash.starts_with("$y$")) << hash;
  EXPECT_TRUE(ui::verify_password(hash, "s3cret pass"));
  EXPECT_FALSE(ui::verify_password(hash, "s3cret pass\n"));
}

TEST(UiPasswdTest, WindowsLineEndingIsNotPartOfThePassword) {
  const PasswdRun run = run_passwd("abc\r\n");
  ASSERT_EQ(run.code, kExitOk);
  EXPECT_TRUE(ui::verify_password(run.out.substr(0, run.out.size() - 1), "abc"));
}

TEST(UiPasswdTest, EmptyPasswordIsAUsageError) {
  EXPECT_EQ(run_passwd("\n").code, kExitUsage);
  EXPECT_EQ(run_passwd("").code, kExitUsage);
  EXPECT_EQ(run_passwd("").out, "");
}

}  // namespace
}  // namespace pgjobd
