// End-to-end: the README's examples of waiting for a result (tests/examples/), each run as an
// application would run it against a daemon whose exec handler prints a JSON result: it
// enqueues, waits for the pgjobd_finished notification naming its job and prints the
// outcome, well before its 5 s re-check would have found it.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "support/build_paths.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct ExampleRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::chrono::milliseconds took{0};
};

// `command` (one /bin/sh line) with its output captured, cut off after 60 s.
ExampleRun run_example(const std::string& command) {
  TempDir dir;
  const auto started = Clock::now();
  const std::string line = "timeout 60 " + command + " >" + shell_quote(dir.file("out")) + " 2>" +
                           shell_quote(dir.file("err"));
  const int status = std::system(line.c_str());
  ExampleRun run;
  run.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_text_file(dir.file("out"));
  run.err = read_text_file(dir.file("err"));
  return run;
}

// Debian's node-pg lives in /usr/share/nodejs, which Debian's node searches and another
// build of node does not; next to another node, scripts/install-deps.sh unpacks the same
// package under /usr/local/lib/debian-node-pg.
std::string node_command() {
  const char* path = std::getenv("NODE_PATH");
  return "env NODE_PATH=" +
         shell_quote(std::string(path ? path : "") +
                     ":/usr/share/nodejs:/usr/local/lib/debian-node-pg/usr/share/nodejs") +
         " node";
}

class ExamplesE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonYaml yaml(schema_.name());
    // Long enough that the example's first check finds the job not yet ended.
    yaml.shell_handler("add", R"(sleep 0.3; echo '{"sum": 3}')");
    daemon_ = std::make_unique<DaemonProcess>(yaml.text());
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
  }

  // Runs `interpreter example URL SCHEMA add PAYLOAD` and checks the outcome it prints.
  void expect_result(const std::string& interpreter, const std::string& example) {
    const ExampleRun run =
        run_example(interpreter + " " + shell_quote(source_path("tests/examples/" + example)) +
                    " " + shell_quote(test_database_url()) + " " + shell_quote(schema_.name()) +
                    " add '{\"a\": 1, \"b\": 2}' 30");
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    const nlohmann::json printed = nlohmann::json::parse(run.out);
    EXPECT_EQ(printed.at("status"), "done") << run.out;
    EXPECT_EQ(printed.at("result"), nlohmann::json::parse(R"({"sum": 3})")) << run.out;
    EXPECT_EQ(schema_.query("SELECT status FROM {jobs} WHERE id = " +
                            std::to_string(printed.at("id").get<std::int64_t>())),
              "done");
    // The notification ended the wait, not the re-check 5 s after the first look.
    EXPECT_LT(run.took, std::chrono::milliseconds(4000)) << run.err;
    stop_daemon(*daemon_);
  }

  TestSchema schema_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(ExamplesE2E, PythonWaitsForTheResultOfAnExecJob) {
  // Debian's interpreter, the one python3-psycopg installs into (scripts/install-deps.sh).
  expect_result("/usr/bin/python3", "wait_for_result.py");
}

TEST_F(ExamplesE2E, NodeWaitsForTheResultOfAnExecJob) {
  if (run_example(node_command() + " -e \"require('pg')\"").exit_code != 0) {
    GTEST_SKIP() << "node-pg is not installed (scripts/install-deps.sh --with-test)";
  }
  expect_result(node_command(), "wait_for_result.js");
}

}  // namespace
}  // namespace pgjobd::testing
