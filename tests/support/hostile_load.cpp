// The normal load and the bounds of the hostile-input end-to-end suites.

#include "support/hostile_load.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

namespace pgjobd::testing {
namespace {

// One "Name:   12345 kB" line of /proc/PID/status, in KiB; -1 when absent.
long status_kib(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + ":", 0) == 0) return std::stol(line.substr(name.size() + 1));
  }
  return -1;
}

}  // namespace

std::string sql_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

DaemonYaml& add_normal_handler(DaemonYaml& yaml) {
  return yaml.handler(kNormalType, "{builtin: noop}");
}

void insert_normal_half(TestSchema& schema) { schema.insert_jobs(kNormalType, kNormalHalf); }

::testing::AssertionResult normal_jobs_done(TestSchema& schema, std::chrono::milliseconds timeout) {
  const std::string normal =
      "type = " + sql_quote(kNormalType) + " AND queue = 'default' AND payload ? 'n'";
  const bool done = wait_until(
      [&] { return schema.count(normal + " AND status = 'done'") == 2 * kNormalHalf; }, timeout);
  if (done && schema.count(normal) == 2 * kNormalHalf) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "not all " << 2 * kNormalHalf << " normal jobs are done: " << summary_by_type(schema);
}

::testing::AssertionResult still_claims(TestSchema& schema, DaemonProcess& daemon) {
  if (!daemon.running()) return ::testing::AssertionFailure() << "the daemon has exited";
  const std::string id =
      schema.query("INSERT INTO {jobs} (type, payload) VALUES (" + sql_quote(kNormalType) +
                   ", '{\"after\": true}') RETURNING id");
  if (!wait_until([&] { return schema.count("id = " + id + " AND status = 'done'") == 1; }, 20s)) {
    return ::testing::AssertionFailure()
           << "job " << id << " inserted afterwards is not done: " << summary_by_type(schema);
  }
  if (!daemon.running()) return ::testing::AssertionFailure() << "the daemon has exited";
  return ::testing::AssertionSuccess();
}

bool built_with_sanitizers() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

void expect_rss_bounded(pid_t pid, const std::string& when, long bound_kib) {
  const long rss = status_kib(pid, "VmRSS");
  const long peak = status_kib(pid, "VmHWM");
  std::cout << "[ RSS      ] " << ::testing::UnitTest::GetInstance()->current_test_info()->name()
            << " " << when << ": VmRSS " << rss / 1024 << " MiB, VmHWM (peak) " << peak / 1024
            << " MiB, bound " << bound_kib / 1024 << " MiB"
            << (built_with_sanitizers() ? " (not enforced: sanitizer build)" : "") << std::endl;
  ASSERT_GT(rss, 0) << "no VmRSS for pid " << pid;
  ASSERT_GT(peak, 0) << "no VmHWM for pid " << pid;
  if (built_with_sanitizers()) return;
  EXPECT_LT(rss, bound_kib) << when;
  EXPECT_LT(peak, bound_kib) << when;
}

std::string summary_by_type(TestSchema& schema) {
  return "jobs by type/status: " +
         schema.query(
             "SELECT string_agg(left(type, 40) || '/' || status || '=' || n, ', ' "
             "ORDER BY type, status) FROM (SELECT type, status, count(*) n FROM {jobs} "
             "GROUP BY type, status) s");
}

int line_count(const std::string& text) {
  std::istringstream in(text);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

std::string stored_error_bytes(TestSchema& schema, const std::string& id, const std::string& what) {
  const std::string bytes =
      schema.query("SELECT octet_length(last_error) FROM {jobs} WHERE id = " + id);
  std::cout << "[ STORED   ] " << what << " kept as " << bytes << " bytes" << std::endl;
  return bytes;
}

}  // namespace pgjobd::testing
