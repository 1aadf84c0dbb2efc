// Hostile responses through the real binary: a buggy downstream service answers an http
// handler with a Retry-After in the year 300000, a 20 MB error page or bytes that are not
// text, and an exec handler's child floods stderr or writes garbage to it. Each test puts
// 1,000 normal jobs around them and checks that they all finish, that the hostile job
// ends with a bounded, valid last_error, that the daemon is still alive and claiming, and
// that its memory stays bounded.

#include <civetweb.h>
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "support/daemon_process.hpp"
#include "support/hostile_load.hpp"
#include "support/test_database.hpp"
#include "support/wait_until.hpp"

namespace pgjobd::testing {
namespace {

constexpr std::size_t kHugeBodyBytes = 20 * 1024 * 1024;
// Not UTF-8 (a bad lead byte, a stray continuation, an overlong NUL) and a real NUL, which
// PostgreSQL text cannot hold.
const std::string kGarbledBody = std::string("bad \xFF\xFE nul") + '\0' + "byte \xC0\x80 end";
const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD
const std::string kGarbledStored =
    "bad " + kReplacement + kReplacement + " nulbyte " + kReplacement + kReplacement + " end";

// A downstream service on a free port, through civetweb's C API (already linked for the
// daemon's /metrics). Each path answers every request the same way and counts them.
class HostileService {
 public:
  HostileService() : huge_body_(kHugeBodyBytes, 'x') {
    const char* options[] = {"listening_ports", "127.0.0.1:0", "num_threads", "16", nullptr};
    mg_callbacks callbacks{};
    context_ = mg_start(&callbacks, nullptr, options);
    if (context_ == nullptr) throw std::runtime_error("cannot start the test HTTP server");
    mg_server_port ports[1] = {};
    mg_get_server_ports(context_, 1, ports);
    port_ = ports[0].port;
    mg_set_request_handler(context_, "/ok", &HostileService::on_ok, this);
    mg_set_request_handler(context_, "/far-future", &HostileService::on_far_future, this);
    mg_set_request_handler(context_, "/huge", &HostileService::on_huge, this);
    mg_set_request_handler(context_, "/garbled", &HostileService::on_garbled, this);
    mg_set_request_handler(context_, "/huge-ok", &HostileService::on_huge_ok, this);
  }
  ~HostileService() { mg_stop(context_); }
  HostileService(const HostileService&) = delete;
  HostileService& operator=(const HostileService&) = delete;

  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int ok_requests() const { return ok_requests_; }
  int far_future_requests() const { return far_future_requests_; }

 private:
  static void respond(mg_connection* conn, int status, const std::string& body,
                      const char* extra_header_lines = "") {
    char buffer[4096];
    while (mg_read(conn, buffer, sizeof buffer) > 0) {
    }  // the payload: not needed, but read so the client is never stuck sending it
    mg_printf(conn,
              "HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n%s\r\n",
              status, body.size(), extra_header_lines);
    mg_write(conn, body.data(), body.size());
  }
  static int on_ok(mg_connection* conn, void* self) {
    ++static_cast<HostileService*>(self)->ok_requests_;
    respond(conn, 200, "fine");
    return 200;
  }
  static int on_far_future(mg_connection* conn, void* self) {
    ++static_cast<HostileService*>(self)->far_future_requests_;
    respond(conn, 503, "come back later", "Retry-After: Mon, 01 Jan 300000 00:00:00 GMT\r\n");
    return 503;
  }
  static int on_huge(mg_connection* conn, void* self) {
    respond(conn, 500, static_cast<HostileService*>(self)->huge_body_);
    return 500;
  }
  static int on_huge_ok(mg_connection* conn, void* self) {
    respond(conn, 200, static_cast<HostileService*>(self)->huge_body_);
    return 200;
  }
  static int on_garbled(mg_connection* conn, void*) {
    respond(conn, 500, kGarbledBody);
    return 500;
  }

  const std::string huge_body_;
  mg_context* context_ = nullptr;
  int port_ = 0;
  std::atomic<int> ok_requests_{0};
  std::atomic<int> far_future_requests_{0};
};

std::string http_handler(const HostileService& service, const std::string& path) {
  return "{http: {url: " + yaml_quote(service.url(path)) + "}, timeout: 20s}";
}

// The normal jobs' first half, one job of each hostile type with a single attempt, then
// the second half; returns the two hostile jobs' ids.
std::pair<std::string, std::string> insert_between_normal_halves(TestSchema& schema,
                                                                 const std::string& first,
                                                                 const std::string& second) {
  const auto insert = [&](const std::string& type) {
    return schema.query("INSERT INTO {jobs} (type, max_attempts) VALUES (" + sql_quote(type) +
                        ", 1) RETURNING id");
  };
  insert_normal_half(schema);
  std::pair<std::string, std::string> ids{insert(first), insert(second)};
  insert_normal_half(schema);
  return ids;
}

// Waits until both jobs are dead (their one attempt failed).
::testing::AssertionResult both_dead(TestSchema& schema, const std::string& a,
                                     const std::string& b) {
  if (wait_until(
          [&] { return schema.count("id IN (" + a + ", " + b + ") AND status = 'dead'") == 2; },
          30s)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "jobs " << a << " and " << b << " are not both dead: " << summary_by_type(schema);
}

TEST(HostileInputResponsesE2E, RetryAfterInTheYear300000IsCappedAtMaxDelay) {
  constexpr int kHooks = 50;
  TestSchema schema;
  HostileService service;
  DaemonYaml yaml(schema.name());
  // max_delay 1h: far enough to tell "capped" from "ignored" (the 10ms backoff).
  add_normal_handler(yaml)
      .set("worker", "{concurrency: 16}")
      .set("retry", "{base: 10ms, max_delay: 1h, jitter: 0}")
      .handler("far", http_handler(service, "/far-future"))
      .handler("hook", http_handler(service, "/ok"));

  insert_normal_half(schema);
  const std::string far = schema.query("INSERT INTO {jobs} (type) VALUES ('far') RETURNING id");
  // Their completions share batches with the capped retry's.
  schema.exec("INSERT INTO {jobs} (type) SELECT 'hook' FROM generate_series(1, " +
              std::to_string(kHooks) + ")");
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  insert_normal_half(schema);

  EXPECT_TRUE(normal_jobs_done(schema)) << daemon.log();
  EXPECT_TRUE(wait_until(
      [&] {
        return schema.count("type = 'hook' AND status = 'done'") == kHooks &&
               schema.count("id = " + far + " AND status = 'failed'") == 1;
      },
      20s))
      << summary_by_type(schema);
  EXPECT_EQ(service.ok_requests(), kHooks);
  EXPECT_EQ(service.far_future_requests(), 1);
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + far),
            "HTTP 503: come back later");
  // The service's wish, capped at retry.max_delay: waiting, but not for centuries.
  EXPECT_EQ(schema.query("SELECT attempts || ' ' || (run_at <= now() + interval '1 hour') || ' ' "
                         "|| (run_at >= now() + interval '55 minutes') FROM {jobs} WHERE id = " +
                         far),
            "1 true true")
      << schema.query("SELECT run_at - now() FROM {jobs} WHERE id = " + far);
  EXPECT_TRUE(still_claims(schema, daemon));
  expect_rss_bounded(daemon.pid(), "after 1,051 jobs");
  stop_daemon(daemon);
}

TEST(HostileInputResponsesE2E, HugeAndGarbledErrorBodiesAreStoredBoundedAndValid) {
  TestSchema schema;
  HostileService service;
  DaemonYaml yaml(schema.name());
  add_normal_handler(yaml)
      .set("worker", "{concurrency: 8}")
      .handler("huge", http_handler(service, "/huge"))
      .handler("garbled", http_handler(service, "/garbled"));

  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const auto [huge, garbled] = insert_between_normal_halves(schema, "huge", "garbled");

  EXPECT_TRUE(normal_jobs_done(schema));
  EXPECT_TRUE(both_dead(schema, huge, garbled));
  const std::string huge_error_bytes = stored_error_bytes(schema, huge, "20 MB error body");
  EXPECT_EQ(schema.count("id = " + huge +
                         " AND last_error LIKE 'HTTP 500: xxx%' AND "
                         "octet_length(last_error) <= 8256 AND errors->0->>'error' = last_error"),
            1)
      << huge_error_bytes
      << " bytes: " << schema.query("SELECT left(last_error, 100) FROM {jobs} WHERE id = " + huge);
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + garbled),
            "HTTP 500: " + kGarbledStored);
  EXPECT_TRUE(still_claims(schema, daemon));
  expect_rss_bounded(daemon.pid(), "after a 20 MB error body");
  stop_daemon(daemon);
}

TEST(HostileInputResponsesE2E, ExecStderrFloodAndGarbageAreStoredBoundedAndValid) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  add_normal_handler(yaml)
      .set("worker", "{concurrency: 8}")
      .shell_handler("flood",
                     "head -c 52428800 /dev/zero | tr '\\0' e >&2; echo ' the end' >&2; exit 1")
      .shell_handler("garbled", R"(printf 'bad \377\376 nul\000byte \300\200 end\n' >&2; exit 1)");

  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  const auto [flood, garbled] = insert_between_normal_halves(schema, "flood", "garbled");

  EXPECT_TRUE(normal_jobs_done(schema));
  EXPECT_TRUE(both_dead(schema, flood, garbled));
  const std::string flood_error_bytes = stored_error_bytes(schema, flood, "50 MB of stderr");
  // The exit status and the tail of stderr, which ends the output.
  EXPECT_EQ(schema.count("id = " + flood +
                         " AND last_error LIKE 'exit 1: ...eee%' AND "
                         "last_error LIKE '%eee the end' AND octet_length(last_error) <= 8256"),
            1)
      << flood_error_bytes
      << " bytes: " << schema.query("SELECT left(last_error, 100) FROM {jobs} WHERE id = " + flood);
  EXPECT_EQ(schema.query("SELECT last_error FROM {jobs} WHERE id = " + garbled),
            "exit 1: " + kGarbledStored);
  EXPECT_EQ(schema.query("SELECT errors->0->>'error' FROM {jobs} WHERE id = " + garbled),
            "exit 1: " + kGarbledStored);
  EXPECT_TRUE(still_claims(schema, daemon));
  expect_rss_bounded(daemon.pid(), "after 50 MB of stderr");
  stop_daemon(daemon);
}

// A 2xx body is the job's result (README "Results"): a 20 MB one is read to the end, the job
// is done with the truncated form (worker.max_result_bytes' 64 KiB head), and the daemon's
// memory stays bounded.
TEST(HostileInputResponsesE2E, AHugeResponseBodyIsStoredTruncatedAsTheResult) {
  TestSchema schema;
  HostileService service;
  DaemonYaml yaml(schema.name());
  yaml.handler("small", http_handler(service, "/ok"))
      .handler("huge_ok", http_handler(service, "/huge-ok"));
  DaemonProcess daemon(yaml.text());
  ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
  schema.exec("INSERT INTO {jobs} (type) VALUES ('small'), ('huge_ok')");
  ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 2; }, 60s))
      << table_summary(schema) << daemon.log();
  EXPECT_EQ(schema.query("SELECT result::text FROM {jobs} WHERE type = 'small'"), R"("fine")");
  EXPECT_EQ(schema.query("SELECT (result->>'truncated') || ' ' || (result->>'bytes') || ' ' || "
                         "length(result->>'head') FROM {jobs} WHERE type = 'huge_ok'"),
            "true " + std::to_string(kHugeBodyBytes) + " 65536");
  expect_rss_bounded(daemon.pid(), "after a 20 MB result body");
  stop_daemon(daemon);
}

}  // namespace
}  // namespace pgjobd::testing
