#pragma once
// Shared by the hostile-input end-to-end suites (tests/e2e/hostile_*_e2etest.cpp): the
// 1,000 normal jobs enqueued around each hostile row or response, and the bounds every such
// test checks afterwards (the daemon alive and still claiming, its memory, /metrics size).

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <string>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {

// Half of the normal jobs: this many go in before the hostile row, as many after it.
inline constexpr int kNormalHalf = 500;
// Their type, served by the builtin noop handler (add_normal_handler), in queue "default".
inline constexpr const char* kNormalType = "ok";

// The RSS a daemon may reach in these tests: far above an idle daemon (~20 MB), far below
// what buffering a 20 MB response, 50 MB of stderr or 20 payloads of 6 MB would cost.
inline constexpr long kRssBoundKib = 150 * 1024;

// `text` as a PostgreSQL string literal (standard_conforming_strings: only quotes double).
std::string sql_quote(const std::string& text);

// handlers.ok: {builtin: noop}.
DaemonYaml& add_normal_handler(DaemonYaml& yaml);
// Inserts kNormalHalf normal jobs in queue "default".
void insert_normal_half(TestSchema& schema);
// Waits until all 2 × kNormalHalf normal jobs are done.
::testing::AssertionResult normal_jobs_done(TestSchema& schema,
                                            std::chrono::milliseconds timeout = 60s);
// The daemon is alive and claims and finishes a normal job inserted now.
::testing::AssertionResult still_claims(TestSchema& schema, DaemonProcess& daemon);

// Whether this build runs under AddressSanitizer or ThreadSanitizer, whose shadow memory
// and quarantine make the RSS many times larger: the bound is then reported, not enforced.
bool built_with_sanitizers();
// Prints the daemon's VmRSS and VmHWM (its peak RSS, so a spike between samples counts
// too) and expects both below `bound_kib`.
void expect_rss_bounded(pid_t pid, const std::string& when, long bound_kib = kRssBoundKib);

// The size in bytes of job `id`'s last_error, printed as "[ STORED   ] <what> kept as N
// bytes" for the record of what the bounds keep.
std::string stored_error_bytes(TestSchema& schema, const std::string& id, const std::string& what);

// "jobs by type/status: ok/done=1000, ...", for failure messages.
std::string summary_by_type(TestSchema& schema);

// Number of lines in `text`.
int line_count(const std::string& text);

}  // namespace pgjobd::testing
