// The http handler against small in-process civetweb servers: status mapping, headers, stop,
// and connections kept between jobs.
#include "handlers/http_handler.hpp"

#include <arpa/inet.h>
#include <civetweb.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "support/silent_server.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kHttpResultBytes = 65536;  // worker.max_result_bytes's default
constexpr int kHttpConcurrency = 64;             // worker.concurrency, as in the benchmark

// What the server saw of the last request to /ok.
struct Received {
  int count = 0;  // requests to /ok so far
  std::string body;
  std::map<std::string, std::string> headers;
};

// The raw civetweb C API (not CivetServer) keeps this test on the same library that
// prometheus-cpp's Exposer already pulls in.
class TestServer {
 public:
  TestServer() {
    const char* options[] = {"listening_ports", "127.0.0.1:0", "num_threads", "8", nullptr};
    mg_callbacks callbacks{};
    context_ = mg_start(&callbacks, nullptr, options);
    if (context_ == nullptr) throw std::runtime_error("cannot start the test server");
    mg_server_port ports[1] = {};
    mg_get_server_ports(context_, 1, ports);
    port_ = ports[0].port;
    mg_set_request_handler(context_, "/ok", &TestServer::on_ok, this);
    mg_set_request_handler(context_, "/no-content", &TestServer::on_status<204>, nullptr);
    mg_set_request_handler(context_, "/unavailable", &TestServer::on_unavailable, this);
    mg_set_request_handler(context_, "/unavailable-until", &TestServer::on_unavailable_until, this);
    mg_set_request_handler(context_, "/missing", &TestServer::on_status<404>, nullptr);
    mg_set_request_handler(context_, "/throttled", &TestServer::on_status<429>, nullptr);
    mg_set_request_handler(context_, "/huge-error", &TestServer::on_huge_error, this);
    mg_set_request_handler(context_, "/hang", &TestServer::on_hang, this);
    mg_set_request_handler(context_, "/json", &TestServer::on_json, nullptr);
    mg_set_request_handler(context_, "/huge", &TestServer::on_huge, nullptr);
    mg_set_request_handler(context_, "/alternating", &TestServer::on_alternating, this);
  }

  ~TestServer() {
    release();  // lets /hang requests finish so mg_stop can join its workers
    mg_stop(context_);
  }

  std::string url(const std::string& path, const std::string& host = "127.0.0.1") const {
    return "http://" + host + ":" + std::to_string(port_) + path;
  }

  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    released_cv_.notify_all();
  }

  // /hang requests the server holds now.
  int hanging() {
    std::lock_guard lock(mutex_);
    return hanging_;
  }

  Received received() {
    std::lock_guard lock(mutex_);
    return received_;
  }

 private:
  static void respond(mg_connection* conn, int status, const std::string& body,
                      const char* extra_header_lines = "",
                      const char* content_type = "text/plain") {
    mg_printf(conn,
              "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n%s\r\n",
              status, content_type, body.size(), extra_header_lines);
    mg_write(conn, body.data(), body.size());
  }

  static int on_ok(mg_connection* conn, void* self_data) {
    auto* self = static_cast<TestServer*>(self_data);
    Received seen;
    char buffer[1024];
    for (int n; (n = mg_read(conn, buffer, sizeof buffer)) > 0;) seen.body.append(buffer, n);
    const mg_request_info* info = mg_get_request_info(conn);
    for (int i = 0; i < info->num_headers; ++i) {
      seen.headers[info->http_headers[i].name] = info->http_headers[i].value;
    }
    seen.headers["method"] = info->request_method;
    {
      std::lock_guard lock(self->mutex_);
      seen.count = self->received_.count + 1;
      self->received_ = std::move(seen);
    }
    respond(conn, 200, "fine");
    return 200;
  }

  template <int kStatus>
  static int on_status(mg_connection* conn, void*) {
    respond(conn, kStatus, "");
    return kStatus;
  }

  static int on_unavailable(mg_connection* conn, void*) {
    respond(conn, 503, "overloaded", "Retry-After: 7\r\n");
    return 503;
  }

  // Retry-After as an HTTP-date two minutes from now.
  static int on_unavailable_until(mg_connection* conn, void*) {
    const std::time_t when = std::time(nullptr) + 120;
    std::tm utc{};
    gmtime_r(&when, &utc);
    char header[128];
    std::strftime(header, sizeof header, "Retry-After: %a, %d %b %Y %H:%M:%S GMT\r\n", &utc);
    respond(conn, 503, "", header);
    return 503;
  }

  static int on_huge_error(mg_connection* conn, void*) {
    respond(conn, 500, std::string(100000, 'x'));
    return 500;
  }

  static int on_json(mg_connection* conn, void*) {
    respond(conn, 200, R"({"sum": 3})", "", "application/json; charset=utf-8");
    return 200;
  }

  static int on_huge(mg_connection* conn, void*) {
    respond(conn, 200, std::string(3 * kHttpResultBytes, 'y'), "", "application/json");
    return 200;
  }

  // 503 with a Retry-After and a body, then 503 with neither, and so on.
  static int on_alternating(mg_connection* conn, void* self_data) {
    auto* self = static_cast<TestServer*>(self_data);
    bool first = false;
    {
      std::lock_guard lock(self->mutex_);
      first = self->alternating_++ % 2 == 0;
    }
    if (first) {
      respond(conn, 503, "overloaded", "Retry-After: 7\r\n");
    } else {
      respond(conn, 503, "");
    }
    return 503;
  }

  static int on_hang(mg_connection* conn, void* self_data) {
    auto* self = static_cast<TestServer*>(self_data);
    std::unique_lock lock(self->mutex_);
    ++self->hanging_;
    self->released_cv_.wait(lock, [self] { return self->released_; });
    --self->hanging_;
    lock.unlock();
    respond(conn, 200, "late");
    return 200;
  }

  mg_context* context_ = nullptr;
  int port_ = 0;
  std::mutex mutex_;
  std::condition_variable released_cv_;
  bool released_ = false;
  int hanging_ = 0;
  int alternating_ = 0;
  Received received_;
};

HandlerConfig http_config(const std::string& url, Millis timeout = Millis(5000)) {
  HandlerConfig config;
  config.kind = HandlerConfig::Kind::kHttp;
  config.http_url = url;
  config.timeout = timeout;
  return config;
}

Job sample_job() {
  Job job;
  job.id = 42;
  job.queue = "mail";
  job.type = "send_email";
  job.payload = R"({"to":"a@example.com","n":1})";
  job.attempt = 3;
  return job;
}

// A port nothing listens on: bound once to learn a free number, then closed.
int closed_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

// The host the suites' URLs name, their parameter: an IP literal, which the handler's own
// client carries (plain_http.hpp), or a name, which it leaves to libcurl. Every behaviour is
// tested on both.
class HostParam : public ::testing::TestWithParam<const char*> {
 protected:
  static std::string host() { return GetParam(); }
};
std::string client_name(const ::testing::TestParamInfo<const char*>& param) {
  return std::string(param.param) == "localhost" ? "Libcurl" : "OwnClient";
}
#define PGJOBD_BOTH_CLIENTS(suite) \
  INSTANTIATE_TEST_SUITE_P(Clients, suite, ::testing::Values("127.0.0.1", "localhost"), client_name)

// One server for the suite: mg_stop takes up to civetweb's 2 s poll quantum.
class HttpHandlerTest : public HostParam {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<TestServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  static std::string url(const std::string& path) { return server_->url(path, host()); }
  static JobResult run(const std::string& path, Millis timeout = Millis(5000)) {
    return make_http_handler(http_config(url(path), timeout), kHttpResultBytes, kHttpConcurrency)(
        sample_job(), {});
  }

  static inline std::unique_ptr<TestServer> server_;
};
PGJOBD_BOTH_CLIENTS(HttpHandlerTest);

TEST_P(HttpHandlerTest, SuccessIsDoneAndPostsPayloadWithHeaders) {
  const JobResult result = run("/ok");
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error;
  const Received received = server_->received();
  EXPECT_EQ(received.body, sample_job().payload);
  auto header = [&received](const std::string& name) {
    const auto found = received.headers.find(name);
    return found == received.headers.end() ? std::string("<missing>") : found->second;
  };
  EXPECT_EQ(header("method"), "POST");
  EXPECT_EQ(header("Content-Type"), "application/json");
  EXPECT_EQ(header("X-Pgjobd-Job-Id"), "42");
  EXPECT_EQ(header("X-Pgjobd-Job-Type"), "send_email");
  EXPECT_EQ(header("X-Pgjobd-Job-Queue"), "mail");
  EXPECT_EQ(header("X-Pgjobd-Job-Attempt"), "3");
  EXPECT_EQ(header("User-Agent").rfind("pgjobd/", 0), 0U) << header("User-Agent");
}

TEST_P(HttpHandlerTest, AnyTwoHundredIsDone) {
  EXPECT_EQ(run("/no-content").outcome, Outcome::kDone);
}

TEST_P(HttpHandlerTest, ServiceUnavailableRetriesAfterRetryAfter) {
  const JobResult result = run("/unavailable");
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "HTTP 503: overloaded");
  ASSERT_TRUE(result.retry_after.has_value());
  EXPECT_EQ(*result.retry_after, std::chrono::seconds(7));
}

TEST_P(HttpHandlerTest, RetryAfterMayBeAnHttpDate) {
  const JobResult result = run("/unavailable-until");
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  ASSERT_TRUE(result.retry_after.has_value());
  EXPECT_GT(*result.retry_after, std::chrono::seconds(110));
  EXPECT_LE(*result.retry_after, std::chrono::seconds(120));
}

// A request's transfer (handle, buffers) serves the next job of the handler: nothing of one
// response (its body, its Retry-After) reaches the next job's result.
TEST_P(HttpHandlerTest, TheNextJobOnAReusedTransferKeepsNothingOfTheLastResponse) {
  const Handler handler =
      make_http_handler(http_config(url("/alternating")), kHttpResultBytes, kHttpConcurrency);
  const JobResult first = handler(sample_job(), {});
  EXPECT_EQ(first.outcome, Outcome::kRetry);
  EXPECT_EQ(first.error, "HTTP 503: overloaded");
  EXPECT_EQ(first.retry_after, Millis(7000));
  const JobResult second = handler(sample_job(), {});
  EXPECT_EQ(second.outcome, Outcome::kRetry);
  EXPECT_EQ(second.error, "HTTP 503");
  EXPECT_FALSE(second.retry_after.has_value());
}

TEST(HttpRetryAfterTest, FarFutureDateSaturates) {
  // The date of the incident: 9403122328289 s ahead, which once overflowed downstream.
  EXPECT_EQ(parse_retry_after("Mon, 01 Jan 300000 00:00:00 GMT"),
            std::optional<Millis>(kMaxRetryAfter));
}

TEST(HttpRetryAfterTest, NumberTooLongForAnIntegerSaturates) {
  EXPECT_EQ(parse_retry_after("99999999999999999999"), std::optional<Millis>(kMaxRetryAfter));
  EXPECT_EQ(parse_retry_after("31536001"), std::optional<Millis>(kMaxRetryAfter));
}

TEST(HttpRetryAfterTest, NegativeAndGarbageAreIgnored) {
  EXPECT_EQ(parse_retry_after("-5"), std::nullopt);
  EXPECT_EQ(parse_retry_after("soon"), std::nullopt);
  EXPECT_EQ(parse_retry_after(""), std::nullopt);
  EXPECT_EQ(parse_retry_after("1.5"), std::nullopt);
}

TEST(HttpRetryAfterTest, PlainSecondsAndPastDates) {
  EXPECT_EQ(parse_retry_after(" 7 "), std::optional<Millis>(Millis(7000)));
  EXPECT_EQ(parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT"), std::optional<Millis>(Millis(0)));
}

TEST_P(HttpHandlerTest, NotFoundIsDead) {
  const JobResult result = run("/missing");
  EXPECT_EQ(result.outcome, Outcome::kDead);
  EXPECT_EQ(result.error, "HTTP 404");
}

TEST_P(HttpHandlerTest, TooManyRequestsRetries) {
  const JobResult result = run("/throttled");
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_FALSE(result.retry_after.has_value());
}

TEST_P(HttpHandlerTest, ErrorBodyIsCappedAt4KiB) {
  const JobResult result = run("/huge-error");
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "HTTP 500: " + std::string(4096, 'x'));
}

TEST_P(HttpHandlerTest, TimeoutRetries) {
  const auto start = std::chrono::steady_clock::now();
  const JobResult result = run("/hang", Millis(200));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_NE(result.error.find("timeout"), std::string::npos) << result.error;
}

TEST_P(HttpHandlerTest, StopReleasesPromptly) {
  const Handler handler = make_http_handler(http_config(url("/hang"), Millis(30000)),
                                            kHttpResultBytes, kHttpConcurrency);
  std::stop_source stop;
  // Requests of earlier tests (a timed-out one) may still be held.
  const int held_before = server_->hanging();
  std::jthread stopper([&stop, held_before, this] {
    // Once the request is in flight: the server holds it.
    testing::wait_until([&] { return server_->hanging() == held_before + 1; }, 10s);
    stop.request_stop();
  });
  const auto start = std::chrono::steady_clock::now();
  const JobResult result = handler(sample_job(), stop.get_token());
  // The stop wakes the transfer thread, which drops the request at once.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms);
  EXPECT_EQ(result.outcome, Outcome::kReleased);
}

TEST_P(HttpHandlerTest, AlreadyStoppedIsReleasedWithoutARequest) {
  std::stop_source stop;
  stop.request_stop();
  const Handler handler =
      make_http_handler(http_config(url("/ok")), kHttpResultBytes, kHttpConcurrency);
  const int before = server_->received().count;
  EXPECT_EQ(handler(sample_job(), stop.get_token()).outcome, Outcome::kReleased);
  EXPECT_EQ(server_->received().count, before);
}

TEST_P(HttpHandlerTest, ConnectionRefusedRetries) {
  const std::string url = "http://" + host() + ":" + std::to_string(closed_port()) + "/";
  const JobResult result =
      make_http_handler(http_config(url), kHttpResultBytes, kHttpConcurrency)(sample_job(), {});
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_FALSE(result.error.empty());
}

// One request as a keep-alive server saw it.
struct KeptRequest {
  int remote_port = 0;  // the client's end: the same port means the same connection
  std::string job_id;   // X-Pgjobd-Job-Id
  std::string body;
};

// A server that keeps connections open between requests, as most application servers do,
// for as long as `idle_timeout_ms`. Every request gets 204, except that a body containing
// "hang" is answered only after release() (or 10 s), for a timeout on a kept connection, and
// one containing "linger" only when the server stops (or after 10 s).
class KeepAliveServer {
 public:
  // `threads`: the most requests it serves (or holds) at once.
  explicit KeepAliveServer(int idle_timeout_ms, int threads = 8) {
    const std::string timeout = std::to_string(idle_timeout_ms);
    const std::string thread_count = std::to_string(threads);
    const char* options[] = {"listening_ports",       "127.0.0.1:0",       "num_threads",
                             thread_count.c_str(),    "enable_keep_alive", "yes",
                             "keep_alive_timeout_ms", timeout.c_str(),     nullptr};
    mg_callbacks callbacks{};
    callbacks.connection_close = &KeepAliveServer::on_close;
    context_ = mg_start(&callbacks, this, options);
    if (context_ == nullptr) throw std::runtime_error("cannot start the keep-alive server");
    mg_server_port ports[1] = {};
    mg_get_server_ports(context_, 1, ports);
    port_ = ports[0].port;
    mg_set_request_handler(context_, "/job", &KeepAliveServer::on_job, this);
  }
  KeepAliveServer(const KeepAliveServer&) = delete;
  KeepAliveServer& operator=(const KeepAliveServer&) = delete;
  ~KeepAliveServer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    release();
    mg_stop(context_);
  }

  std::string url(const std::string& host = "127.0.0.1") const {
    return "http://" + host + ":" + std::to_string(port_) + "/job";
  }

  std::vector<KeptRequest> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  int closed_connections() {
    std::lock_guard lock(mutex_);
    return closed_;
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    released_cv_.notify_all();
  }
  // Forgets the requests and holds "hang" requests again, for the next test.
  void reset() {
    std::lock_guard lock(mutex_);
    requests_.clear();
    released_ = false;
  }

 private:
  static int on_job(mg_connection* conn, void* self_data) {
    auto* self = static_cast<KeepAliveServer*>(self_data);
    KeptRequest request;
    char buffer[1024];
    for (int n; (n = mg_read(conn, buffer, sizeof buffer)) > 0;) request.body.append(buffer, n);
    const mg_request_info* info = mg_get_request_info(conn);
    request.remote_port = info->remote_port;
    if (const char* id = mg_get_header(conn, "X-Pgjobd-Job-Id")) request.job_id = id;
    const bool hang = request.body.find("hang") != std::string::npos;
    const bool linger = request.body.find("linger") != std::string::npos;
    {
      std::unique_lock lock(self->mutex_);
      self->requests_.push_back(request);
      if (hang) self->released_cv_.wait_for(lock, 10s, [self] { return self->released_; });
      if (linger) self->released_cv_.wait_for(lock, 10s, [self] { return self->stopping_; });
    }
    mg_printf(conn, "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
    return 204;
  }

  static void on_close(const mg_connection* conn) {
    auto* self = static_cast<KeepAliveServer*>(mg_get_user_data(mg_get_context(conn)));
    std::lock_guard lock(self->mutex_);
    ++self->closed_;
  }

  mg_context* context_ = nullptr;
  int port_ = 0;
  std::mutex mutex_;
  std::condition_variable released_cv_;
  bool released_ = false;
  bool stopping_ = false;
  std::vector<KeptRequest> requests_;
  int closed_ = 0;
};

std::set<int> connections_of(const std::vector<KeptRequest>& requests) {
  std::set<int> ports;
  for (const KeptRequest& request : requests) ports.insert(request.remote_port);
  return ports;
}

Job job_with(std::int64_t id, std::string payload) {
  Job job = sample_job();
  job.id = id;
  job.payload = std::move(payload);
  return job;
}

// One server for the suite (mg_stop takes up to 2 s), keeping idle connections a minute.
class HttpHandlerKeepAliveTest : public HostParam {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<KeepAliveServer>(60000); }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { server_->reset(); }

  static inline std::unique_ptr<KeepAliveServer> server_;
};
PGJOBD_BOTH_CLIENTS(HttpHandlerKeepAliveTest);

class HttpHandlerIdleCloseTest : public HostParam {};
PGJOBD_BOTH_CLIENTS(HttpHandlerIdleCloseTest);

// A new connection per job cost a TCP (and for https a TLS) handshake per job and left a
// TIME_WAIT socket behind each; one worker's consecutive jobs now go over one connection.
// Each request still carries its own job's headers and whole body: nothing of the job
// before (a longer body, its id) leaks into the next.
TEST_P(HttpHandlerKeepAliveTest, ConsecutiveJobsGoOverOneConnection) {
  KeepAliveServer& server = *server_;
  const Handler handler =
      make_http_handler(http_config(server.url(host())), kHttpResultBytes, kHttpConcurrency);
  const std::vector<std::string> payloads = {R"({"n":1,"pad":"xxxxxxxxxxxxxxxxxxxxxxxx"})",
                                             R"({"n":2})", "[]", R"({"n":4,"s":"\r\n"})"};
  for (std::size_t i = 0; i < payloads.size(); ++i) {
    const JobResult result = handler(job_with(static_cast<std::int64_t>(i + 1), payloads[i]), {});
    ASSERT_EQ(result.outcome, Outcome::kDone) << "job " << i + 1 << ": " << result.error;
  }
  const std::vector<KeptRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), payloads.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(requests[i].job_id, std::to_string(i + 1));
    EXPECT_EQ(requests[i].body, payloads[i]);
  }
  EXPECT_EQ(connections_of(requests).size(), 1U);
}

// A transfer that failed (here a timeout, after which libcurl drops the connection) leaves
// its handle fit for the next job, which gets a connection of its own.
TEST_P(HttpHandlerKeepAliveTest, AJobAfterATimeoutOnTheSameHandlerIsDone) {
  KeepAliveServer& server = *server_;
  const Handler handler = make_http_handler(http_config(server.url(host()), Millis(1000)),
                                            kHttpResultBytes, kHttpConcurrency);
  EXPECT_EQ(handler(job_with(1, R"({"n":1})"), {}).outcome, Outcome::kDone);
  const JobResult timed_out = handler(job_with(2, R"({"hang":true})"), {});
  EXPECT_EQ(timed_out.outcome, Outcome::kRetry);
  EXPECT_NE(timed_out.error.find("timeout"), std::string::npos) << timed_out.error;
  server.release();
  const JobResult after = handler(job_with(3, R"({"n":3})"), {});
  EXPECT_EQ(after.outcome, Outcome::kDone) << after.error;
  const std::vector<KeptRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 3U);
  EXPECT_EQ(requests[1].remote_port, requests[0].remote_port);  // the kept connection
  EXPECT_NE(requests[2].remote_port, requests[1].remote_port);  // not the timed-out one
  EXPECT_EQ(requests[2].job_id, "3");
}

// Servers close idle connections (node after 5 s, nginx after 75 s): the next job notices
// and connects again instead of failing on the closed one.
TEST_P(HttpHandlerIdleCloseTest, AConnectionThePeerClosedWhileIdleIsReplaced) {
  KeepAliveServer server(100);
  const Handler handler =
      make_http_handler(http_config(server.url(host())), kHttpResultBytes, kHttpConcurrency);
  ASSERT_EQ(handler(job_with(1, "{}"), {}).outcome, Outcome::kDone);
  ASSERT_TRUE(testing::wait_until([&server] { return server.closed_connections() >= 1; }, 10s));
  const JobResult after = handler(job_with(2, "{}"), {});
  EXPECT_EQ(after.outcome, Outcome::kDone) << after.error;
  EXPECT_EQ(connections_of(server.requests()).size(), 2U);
}

// Jobs running at once never share a connection (libcurl forbids one handle in two
// transfers): each waits on its own, and a third, after them, reuses one of theirs.
TEST_P(HttpHandlerKeepAliveTest, JobsRunningAtOnceEachHaveAConnection) {
  KeepAliveServer& server = *server_;
  const Handler handler =
      make_http_handler(http_config(server.url(host())), kHttpResultBytes, kHttpConcurrency);
  std::vector<JobResult> results(2);
  {
    std::jthread first([&] { results[0] = handler(job_with(1, R"({"hang":1})"), {}); });
    std::jthread second([&] { results[1] = handler(job_with(2, R"({"hang":2})"), {}); });
    ASSERT_TRUE(testing::wait_until([&server] { return server.requests().size() == 2; }, 10s));
    server.release();
  }
  EXPECT_EQ(results[0].outcome, Outcome::kDone) << results[0].error;
  EXPECT_EQ(results[1].outcome, Outcome::kDone) << results[1].error;
  EXPECT_EQ(handler(job_with(3, "{}"), {}).outcome, Outcome::kDone);
  const std::vector<KeptRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 3U);
  EXPECT_NE(requests[0].remote_port, requests[1].remote_port);
  EXPECT_EQ(connections_of(requests).size(), 2U);
}

TEST(HttpHeaderValue, PercentEncodesControlCharactersAndPercent) {
  EXPECT_EQ(header_value("send_email"), "send_email");
  EXPECT_EQ(header_value("résumé ジョブ"), "résumé ジョブ");  // UTF-8 passes as is
  EXPECT_EQ(header_value("a\r\nX-Evil: 1"), "a%0D%0AX-Evil: 1");
  EXPECT_EQ(header_value(std::string("t\0\x7F%", 4)), "t%00%7F%25");
}

}  // namespace
}  // namespace pgjobd

namespace pgjobd {
namespace {

TEST_P(HttpHandlerTest, ResultIsTheBodyAsJsonWhenTheResponseSaysJson) {
  const JobResult result = run("/json");
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_EQ(result.result, R"({"sum": 3})");
  EXPECT_EQ(result.result_format, ResultFormat::kJson);
}

TEST_P(HttpHandlerTest, ResultIsTheBodyAsTextOtherwise) {
  const JobResult result = run("/ok");  // text/plain
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_EQ(result.result, "fine");
  EXPECT_EQ(result.result_format, ResultFormat::kText);
}

// The daemon's memory stays bounded: one byte over the bound is kept, the rest counted.
TEST_P(HttpHandlerTest, ResultKeepsTheBoundPlusOneAndCountsTheWholeBody) {
  const JobResult result = run("/huge");
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_EQ(result.result.size(), kHttpResultBytes + 1);
  EXPECT_EQ(result.result_bytes, 3 * kHttpResultBytes);
}

// Results of jobs started through AsyncHandler::start, by index, as their done calls come.
class Results {
 public:
  explicit Results(std::size_t count) : results_(count) {}
  HandlerDone done_for(std::size_t index) {
    return [this, index](JobResult result) {
      std::lock_guard lock(mutex_);
      results_[index] = std::move(result);
      ++ended_;
    };
  }
  std::size_t ended() {
    std::lock_guard lock(mutex_);
    return ended_;
  }
  bool await_all(std::chrono::milliseconds timeout) {
    return testing::wait_until([this] { return ended() == results_.size(); }, timeout);
  }
  std::optional<JobResult> at(std::size_t index) {
    std::lock_guard lock(mutex_);
    return results_[index];
  }

 private:
  std::mutex mutex_;
  std::vector<std::optional<JobResult>> results_;
  std::size_t ended_ = 0;
};

const AsyncHandler& async_of(const Handler& handler) {
  const auto* async = handler.target<AsyncHandler>();
  if (async == nullptr) throw std::logic_error("the http handler is not an AsyncHandler");
  return *async;
}

constexpr std::size_t kInFlight = 64;

// `count` jobs the server holds, started at once on a handler with `connections` connections
// and `threads` transfer threads, released once `at_server` of them are at the server (none
// ended before): each is done.
void run_held_jobs(KeepAliveServer& server, int connections, int threads, std::size_t count,
                   std::size_t at_server) {
  const Handler handler = make_http_handler(http_config(server.url(), Millis(20000)),
                                            kHttpResultBytes, connections, threads);
  const AsyncHandler& async = async_of(handler);
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < count; ++i) jobs.push_back(job_with(i + 1, R"({"hang":true})"));
  Results results(count);
  for (std::size_t i = 0; i < count; ++i) async.start(jobs[i], {}, results.done_for(i));
  EXPECT_TRUE(testing::wait_until(
      [&server, at_server] { return server.requests().size() == at_server; }, 10s));
  EXPECT_EQ(results.ended(), 0U);
  server.release();
  ASSERT_TRUE(results.await_all(20s));
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_EQ(results.at(i)->outcome, Outcome::kDone) << results.at(i)->error;
  }
}

// The multi tests run with one transfer thread and with two (kHttpTransferThreads aside),
// each with both clients (HostParam).
class HttpHandlerMultiTest : public ::testing::TestWithParam<std::tuple<int, const char*>> {
 protected:
  static std::string host() { return std::get<1>(GetParam()); }
  static Handler handler_for(const std::string& url, Millis timeout, std::size_t concurrency) {
    return make_http_handler(http_config(url, timeout), kHttpResultBytes,
                             static_cast<int>(concurrency), std::get<0>(GetParam()));
  }
};
std::string threads_and_client(
    const ::testing::TestParamInfo<std::tuple<int, const char*>>& param) {
  return std::to_string(std::get<0>(param.param)) + "Threads" +
         (std::string(std::get<1>(param.param)) == "localhost" ? "Libcurl" : "OwnClient");
}
INSTANTIATE_TEST_SUITE_P(TransferThreads, HttpHandlerMultiTest,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values("127.0.0.1", "localhost")),
                         threads_and_client);

// The worker model's point: one thread starts 64 jobs and each start returns at once, so all
// 64 requests are at the server together with none answered (a thread per request would
// have needed 64 threads). Each has its own connection, and the next 64 jobs reuse them:
// the connection cache is shared by all transfers.
TEST_P(HttpHandlerMultiTest, SixtyFourTransfersInFlightStartedFromOneThread) {
  KeepAliveServer server(60000, static_cast<int>(kInFlight) + 8);
  const Handler handler = handler_for(server.url(host()), Millis(20000), kInFlight);
  const AsyncHandler& async = async_of(handler);
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < 2 * kInFlight; ++i) {
    jobs.push_back(
        job_with(static_cast<std::int64_t>(i + 1), i < kInFlight ? R"({"hang":true})" : "{}"));
  }
  Results held(kInFlight);
  for (std::size_t i = 0; i < kInFlight; ++i) async.start(jobs[i], {}, held.done_for(i));
  ASSERT_TRUE(
      testing::wait_until([&server] { return server.requests().size() == kInFlight; }, 20s));
  EXPECT_EQ(held.ended(), 0U);
  server.release();
  ASSERT_TRUE(held.await_all(20s));
  Results next(kInFlight);
  for (std::size_t i = 0; i < kInFlight; ++i) {
    async.start(jobs[kInFlight + i], {}, next.done_for(i));
  }
  ASSERT_TRUE(next.await_all(20s));
  for (std::size_t i = 0; i < kInFlight; ++i) {
    EXPECT_EQ(held.at(i)->outcome, Outcome::kDone) << held.at(i)->error;
    EXPECT_EQ(next.at(i)->outcome, Outcome::kDone) << next.at(i)->error;
  }
  const std::vector<KeptRequest> requests = server.requests();
  ASSERT_EQ(requests.size(), 2 * kInFlight);
  EXPECT_EQ(connections_of(requests).size(), kInFlight);
}

// A server that takes the connection and never answers: every job in flight ends by its own
// timeout, all together rather than one after another, and as a transient failure.
TEST_P(HttpHandlerMultiTest, AServerThatNeverAnswersTimesOutEveryJob) {
  const testing::SilentServer silent;
  const Handler handler = handler_for(silent.url(host()), Millis(500), kInFlight);
  const AsyncHandler& async = async_of(handler);
  std::vector<Job> jobs;
  for (std::size_t i = 0; i < kInFlight; ++i) jobs.push_back(job_with(i + 1, "{}"));
  Results results(kInFlight);
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < kInFlight; ++i) async.start(jobs[i], {}, results.done_for(i));
  ASSERT_TRUE(results.await_all(20s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // 64 x 500 ms one by one: 32 s
  for (std::size_t i = 0; i < kInFlight; ++i) {
    EXPECT_EQ(results.at(i)->outcome, Outcome::kRetry);
    EXPECT_EQ(results.at(i)->error.rfind("timeout after 500ms: ", 0), 0U) << results.at(i)->error;
  }
}

// A stop (cancel, lost lease, drain) ends its own request to a silent server at once, and
// only that one.
TEST_P(HttpHandlerMultiTest, AStopEndsOnlyItsOwnRequestAtOnce) {
  const testing::SilentServer silent;
  const Handler handler = handler_for(silent.url(host()), Millis(30000), kInFlight);
  const AsyncHandler& async = async_of(handler);
  const Job first = job_with(1, "{}");
  const Job second = job_with(2, "{}");
  std::stop_source stop_first;
  std::stop_source stop_second;
  Results results(2);
  async.start(first, stop_first.get_token(), results.done_for(0));
  async.start(second, stop_second.get_token(), results.done_for(1));
  const auto start = std::chrono::steady_clock::now();
  stop_first.request_stop();
  ASSERT_TRUE(testing::wait_until([&results] { return results.ended() == 1; }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(results.at(0)->outcome, Outcome::kReleased);
  EXPECT_FALSE(results.at(1).has_value());
  stop_second.request_stop();
  ASSERT_TRUE(results.await_all(10s));
  EXPECT_EQ(results.at(1)->outcome, Outcome::kReleased);
}

// The connections are shared out between the transfer threads, none lost to rounding: three
// for two threads are two and one, and three requests are at the server at once.
TEST(HttpHandlerTransferThreadsTest, ConnectionsSharedOutCarryAsManyRequestsAtOnce) {
  KeepAliveServer server(60000, 8);
  run_held_jobs(server, 3, 2, 3, 3);
  EXPECT_EQ(connections_of(server.requests()).size(), 3U);
}

// A job started by a job's completion (the worker pool starting the next held job) goes to
// the transfer thread that completed it while that thread has a free connection, even when
// another has more: no other thread is woken for it, and it goes over the connection just
// freed.
TEST(HttpHandlerTransferThreadsTest, AJobStartedByACompletionStaysOnItsThread) {
  KeepAliveServer server(60000, 8);
  // Two threads, two connections each.
  const Handler handler =
      make_http_handler(http_config(server.url(), Millis(20000)), kHttpResultBytes, 4, 2);
  const AsyncHandler& async = async_of(handler);
  const Job first_lingering = job_with(1, R"({"linger":1})");
  const Job second_lingering = job_with(2, R"({"linger":2})");
  const Job chain_start = job_with(3, R"({"hang":3})");
  const Job chain_next = job_with(4, "{}");
  std::stop_source stop_first;
  std::stop_source stop_second;
  Results lingering(2);
  std::mutex mutex;
  std::vector<std::thread::id> chain_threads;  // where each chain job ended
  Results chain(2);
  // The first thread (most free, the first on a tie), then the second, then the first again.
  async.start(first_lingering, stop_first.get_token(), lingering.done_for(0));
  async.start(second_lingering, stop_second.get_token(), lingering.done_for(1));
  async.start(chain_start, {}, [&](JobResult result) {
    {
      std::lock_guard lock(mutex);
      chain_threads.push_back(std::this_thread::get_id());
    }
    async.start(chain_next, {}, [&](JobResult next) {
      {
        std::lock_guard lock(mutex);
        chain_threads.push_back(std::this_thread::get_id());
      }
      chain.done_for(1)(std::move(next));
    });
    chain.done_for(0)(std::move(result));
  });
  ASSERT_TRUE(testing::wait_until([&server] { return server.requests().size() == 3; }, 10s));
  // The second thread is now empty, the first holds a lingering request and the chain's.
  stop_second.request_stop();
  ASSERT_TRUE(testing::wait_until([&lingering] { return lingering.ended() == 1; }, 10s));
  server.release();
  ASSERT_TRUE(chain.await_all(20s));
  EXPECT_EQ(chain.at(0)->outcome, Outcome::kDone) << chain.at(0)->error;
  EXPECT_EQ(chain.at(1)->outcome, Outcome::kDone) << chain.at(1)->error;
  {
    std::lock_guard lock(mutex);
    ASSERT_EQ(chain_threads.size(), 2U);
    EXPECT_EQ(chain_threads[0], chain_threads[1]);
  }
  std::map<std::string, int> port_of;  // by job id: the threads' requests come in any order
  for (const KeptRequest& request : server.requests())
    port_of[request.job_id] = request.remote_port;
  ASSERT_EQ(port_of.size(), 4U);
  EXPECT_EQ(port_of["3"], port_of["4"]);
  stop_first.request_stop();
  ASSERT_TRUE(lingering.await_all(10s));
}

// A response header over libcurl's bound (100 KiB a line) said only "Out of memory".
class HttpHandlerOversizedHeaderTest : public HostParam {};
PGJOBD_BOTH_CLIENTS(HttpHandlerOversizedHeaderTest);

TEST_P(HttpHandlerOversizedHeaderTest, SaysTheHeaderWasTooLarge) {
  int port = 0;
  const int listener = testing::listen_on_loopback(4, port);
  std::jthread server([listener] {
    const int conn = accept(listener, nullptr, nullptr);
    if (conn < 0) return;
    char request[65536];
    [[maybe_unused]] const ssize_t got = recv(conn, request, sizeof request, 0);
    const std::string response =
        "HTTP/1.1 200 OK\r\nX-Big: " + std::string(10 << 20, 'a') + "\r\nContent-Length: 0\r\n\r\n";
    // The client gives up part-way: the rest fails to send, which is the point.
    [[maybe_unused]] const ssize_t sent =
        send(conn, response.data(), response.size(), MSG_NOSIGNAL);
    close(conn);
  });
  const std::string url = "http://" + host() + ":" + std::to_string(port) + "/";
  const JobResult result =
      make_http_handler(http_config(url), kHttpResultBytes, kHttpConcurrency)(sample_job(), {});
  server.join();
  close(listener);
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error.rfind("response header larger than 102400 bytes", 0), 0U) << result.error;
}

TEST(HttpMediaType, JsonIsApplicationJsonOrAnyPlusJson) {
  EXPECT_TRUE(is_json_media_type("application/json"));
  EXPECT_TRUE(is_json_media_type("Application/JSON; charset=utf-8"));
  EXPECT_TRUE(is_json_media_type("application/problem+json"));
  EXPECT_FALSE(is_json_media_type("text/plain"));
  EXPECT_FALSE(is_json_media_type("application/jsonl"));
  EXPECT_FALSE(is_json_media_type("+json"));
  EXPECT_FALSE(is_json_media_type(""));
}

}  // namespace
}  // namespace pgjobd

namespace pgjobd {
namespace {

// A loopback server whose connections are served one after another by `serve` (the
// connection, its number from 0), on a thread of its own: responses written by hand, as
// the own client (plain_http.hpp) and libcurl must both take them.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<void(int, int)> serve)
      : listener_(testing::listen_on_loopback(16, port_)) {
    thread_ = std::thread([this, serve = std::move(serve)] {
      for (int index = 0;; ++index) {
        const int connection = accept(listener_, nullptr, nullptr);
        if (connection < 0) return;  // shut down
        serve(connection, index);
        close(connection);
      }
    });
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;
  ~ScriptedServer() {
    shutdown(listener_, SHUT_RDWR);  // ends the accept
    thread_.join();
    close(listener_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/job"; }
  int port() const { return port_; }

 private:
  int port_ = 0;  // before listener_, which sets it
  int listener_;
  std::thread thread_;
};

// One request off a connection (head and Content-Length body); empty when it closed first.
std::string read_request(int connection) {
  std::string request;
  char buffer[4096];
  std::size_t body_from = std::string::npos;
  std::size_t length = 0;
  while (body_from == std::string::npos || request.size() < body_from + length) {
    const ssize_t got = recv(connection, buffer, sizeof buffer, 0);
    if (got <= 0) return {};
    request.append(buffer, static_cast<std::size_t>(got));
    if (body_from == std::string::npos) {
      const std::size_t end = request.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      body_from = end + 4;
      const std::size_t at = request.find("Content-Length: ");
      if (at != std::string::npos && at < end) length = std::stoul(request.substr(at + 16));
    }
  }
  return request;
}

void send_text(int connection, const std::string& text) {
  ASSERT_EQ(send(connection, text.data(), text.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(text.size()));
}

// Answers every request 204 and keeps the last request it read.
class RecordingServer {
 public:
  RecordingServer()
      : server_([this](int connection, int /*index*/) {
          while (true) {
            std::string request = read_request(connection);
            if (request.empty()) return;
            {
              std::lock_guard lock(mutex_);
              last_ = std::move(request);
            }
            send_text(connection, "HTTP/1.1 204 No Content\r\n\r\n");
          }
        }) {}

  std::string url() const { return server_.url(); }
  int port() const { return server_.port(); }
  std::string last() {
    std::lock_guard lock(mutex_);
    return last_;
  }

 private:
  std::mutex mutex_;
  std::string last_;
  ScriptedServer server_;  // last: its thread uses the members above
};

// A chunked body, written in pieces that split the chunk sizes and the data, is the result
// whole.
TEST(HttpHandlerOwnClientTest, AChunkedBodyWrittenInPiecesIsTheResult) {
  ScriptedServer server([](int connection, int /*index*/) {
    if (read_request(connection).empty()) return;
    send_text(connection, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Enc");
    send_text(connection, "oding: chunked\r\n\r\n4\r\n{\"a\"");
    send_text(connection, "\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n");
  });
  const JobResult result = make_http_handler(http_config(server.url()), kHttpResultBytes,
                                             kHttpConcurrency)(sample_job(), {});
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_EQ(result.result, R"({"a": 1})");
  EXPECT_EQ(result.result_format, ResultFormat::kJson);
}

// The request as it goes out: one POST with the job's headers, Host and the payload's
// length, as libcurl sent it.
TEST(HttpHandlerOwnClientTest, TheRequestCarriesHostLengthAndTheJobsHeaders) {
  RecordingServer server;
  const JobResult result = make_http_handler(http_config(server.url()), kHttpResultBytes,
                                             kHttpConcurrency)(sample_job(), {});
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  const std::string seen = server.last();
  EXPECT_EQ(seen.rfind("POST /job HTTP/1.1\r\n", 0), 0U) << seen;
  for (const std::string& line :
       {"Host: 127.0.0.1:" + std::to_string(server.port()), std::string("Accept: */*"),
        std::string("Content-Type: application/json"), std::string("X-Pgjobd-Job-Id: 42"),
        std::string("X-Pgjobd-Job-Type: send_email"), std::string("X-Pgjobd-Job-Queue: mail"),
        std::string("X-Pgjobd-Job-Attempt: 3"),
        "Content-Length: " + std::to_string(sample_job().payload.size())}) {
    EXPECT_NE(seen.find("\r\n" + line + "\r\n"), std::string::npos) << line << " in " << seen;
  }
  EXPECT_NE(seen.find("\r\nUser-Agent: pgjobd/"), std::string::npos) << seen;
  EXPECT_TRUE(seen.ends_with("\r\n\r\n" + sample_job().payload)) << seen;
}

// A kept connection the server closes as the next request arrives, unanswered: the request
// goes again on a new connection (as libcurl does), and the job is done.
TEST(HttpHandlerOwnClientTest, ARequestLostOnAKeptConnectionIsSentAgainOnANewOne) {
  std::atomic<int> requests = 0;
  ScriptedServer server([&requests](int connection, int index) {
    if (read_request(connection).empty()) return;
    ++requests;
    send_text(connection, "HTTP/1.1 204 No Content\r\n\r\n");
    if (index > 0) return;
    if (!read_request(connection).empty()) ++requests;  // read, never answered: closed
  });
  const Handler handler =
      make_http_handler(http_config(server.url()), kHttpResultBytes, kHttpConcurrency);
  ASSERT_EQ(handler(job_with(1, "{}"), {}).outcome, Outcome::kDone);
  const JobResult again = handler(job_with(2, "{}"), {});
  EXPECT_EQ(again.outcome, Outcome::kDone) << again.error;
  EXPECT_EQ(requests.load(), 3);
}

// An answer cut short (the connection closed inside the body) is a retry, never done.
TEST(HttpHandlerOwnClientTest, AResponseCutShortRetries) {
  ScriptedServer server([](int connection, int /*index*/) {
    if (read_request(connection).empty()) return;
    send_text(connection, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  });
  const JobResult result = make_http_handler(http_config(server.url()), kHttpResultBytes,
                                             kHttpConcurrency)(sample_job(), {});
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_FALSE(result.error.empty());
}

// More requests than connections (two transfer threads may pick one at once) wait for one
// of the connections: never more are opened.
TEST(HttpHandlerOwnClientTest, RequestsBeyondTheConnectionsWaitForOne) {
  KeepAliveServer server(60000, 8);
  run_held_jobs(server, 2, 1, 4, 2);
  EXPECT_EQ(server.requests().size(), 4U);
  EXPECT_EQ(connections_of(server.requests()).size(), 2U);
}

// A proxy from the environment applies as before: the request goes to it, through libcurl.
TEST(HttpHandlerOwnClientTest, AProxyFromTheEnvironmentStillCarriesTheRequest) {
  RecordingServer proxy;
  const std::string target = "http://127.0.0.1:" + std::to_string(closed_port()) + "/job";
  std::map<std::string, std::optional<std::string>> saved;
  for (const char* name : {"http_proxy", "no_proxy", "NO_PROXY"}) {
    const char* value = std::getenv(name);
    saved[name] = value != nullptr ? std::optional<std::string>(value) : std::nullopt;
    unsetenv(name);
  }
  setenv("http_proxy", ("http://127.0.0.1:" + std::to_string(proxy.port())).c_str(), 1);
  const JobResult result =
      make_http_handler(http_config(target), kHttpResultBytes, kHttpConcurrency)(sample_job(), {});
  for (const auto& [name, value] : saved) {
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error;
  const std::string seen = proxy.last();
  EXPECT_EQ(seen.rfind("POST " + target + " HTTP/1.1\r\n", 0), 0U) << seen;
}

}  // namespace
}  // namespace pgjobd
