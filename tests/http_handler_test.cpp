// The http handler against a small in-process civetweb server: status mapping, headers, stop.
#include "handlers/http_handler.hpp"

#include <arpa/inet.h>
#include <civetweb.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>

namespace pgjobd {
namespace {

using namespace std::chrono_literals;

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
  }

  ~TestServer() {
    release();  // lets /hang requests finish so mg_stop can join its workers
    mg_stop(context_);
  }

  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    released_cv_.notify_all();
  }

  Received received() {
    std::lock_guard lock(mutex_);
    return received_;
  }

 private:
  static void respond(mg_connection* conn, int status, const std::string& body,
                      const char* extra_header_lines = "") {
    mg_printf(conn,
              "HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n%s\r\n",
              status, body.size(), extra_header_lines);
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

  static int on_hang(mg_connection* conn, void* self_data) {
    auto* self = static_cast<TestServer*>(self_data);
    std::unique_lock lock(self->mutex_);
    self->released_cv_.wait(lock, [self] { return self->released_; });
    lock.unlock();
    respond(conn, 200, "late");
    return 200;
  }

  mg_context* context_ = nullptr;
  int port_ = 0;
  std::mutex mutex_;
  std::condition_variable released_cv_;
  bool released_ = false;
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

// One server for the suite: mg_stop takes up to civetweb's 2 s poll quantum.
class HttpHandlerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = std::make_unique<TestServer>(); }
  static void TearDownTestSuite() { server_.reset(); }

  static JobResult run(const std::string& path, Millis timeout = Millis(5000)) {
    return make_http_handler(http_config(server_->url(path), timeout))(sample_job(), {});
  }

  static inline std::unique_ptr<TestServer> server_;
};

TEST_F(HttpHandlerTest, SuccessIsDoneAndPostsPayloadWithHeaders) {
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
}

TEST_F(HttpHandlerTest, AnyTwoHundredIsDone) {
  EXPECT_EQ(run("/no-content").outcome, Outcome::kDone);
}

TEST_F(HttpHandlerTest, ServiceUnavailableRetriesAfterRetryAfter) {
  const JobResult result = run("/unavailable");
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "HTTP 503: overloaded");
  ASSERT_TRUE(result.retry_after.has_value());
  EXPECT_EQ(*result.retry_after, std::chrono::seconds(7));
}

TEST_F(HttpHandlerTest, RetryAfterMayBeAnHttpDate) {
  const JobResult result = run("/unavailable-until");
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  ASSERT_TRUE(result.retry_after.has_value());
  EXPECT_GT(*result.retry_after, std::chrono::seconds(110));
  EXPECT_LE(*result.retry_after, std::chrono::seconds(120));
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

TEST_F(HttpHandlerTest, NotFoundIsDead) {
  const JobResult result = run("/missing");
  EXPECT_EQ(result.outcome, Outcome::kDead);
  EXPECT_EQ(result.error, "HTTP 404");
}

TEST_F(HttpHandlerTest, TooManyRequestsRetries) {
  const JobResult result = run("/throttled");
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_FALSE(result.retry_after.has_value());
}

TEST_F(HttpHandlerTest, ErrorBodyIsCappedAt4KiB) {
  const JobResult result = run("/huge-error");
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "HTTP 500: " + std::string(4096, 'x'));
}

TEST_F(HttpHandlerTest, TimeoutRetries) {
  const auto start = std::chrono::steady_clock::now();
  const JobResult result = run("/hang", Millis(200));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_NE(result.error.find("timeout"), std::string::npos) << result.error;
}

TEST_F(HttpHandlerTest, StopReleasesPromptly) {
  const Handler handler = make_http_handler(http_config(server_->url("/hang"), Millis(30000)));
  std::stop_source stop;
  std::jthread stopper([&stop] {
    std::this_thread::sleep_for(200ms);
    stop.request_stop();
  });
  const auto start = std::chrono::steady_clock::now();
  const JobResult result = handler(sample_job(), stop.get_token());
  // libcurl checks the progress callback about once a second while the peer is silent.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms);
  EXPECT_EQ(result.outcome, Outcome::kReleased);
}

TEST_F(HttpHandlerTest, AlreadyStoppedIsReleasedWithoutARequest) {
  std::stop_source stop;
  stop.request_stop();
  const Handler handler = make_http_handler(http_config(server_->url("/ok")));
  const int before = server_->received().count;
  EXPECT_EQ(handler(sample_job(), stop.get_token()).outcome, Outcome::kReleased);
  EXPECT_EQ(server_->received().count, before);
}

TEST_F(HttpHandlerTest, ConnectionRefusedRetries) {
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/";
  const JobResult result = make_http_handler(http_config(url))(sample_job(), {});
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_FALSE(result.error.empty());
}

TEST(HttpHeaderValue, PercentEncodesControlCharactersAndPercent) {
  EXPECT_EQ(header_value("send_email"), "send_email");
  EXPECT_EQ(header_value("résumé ジョブ"), "résumé ジョブ");  // UTF-8 passes as is
  EXPECT_EQ(header_value("a\r\nX-Evil: 1"), "a%0D%0AX-Evil: 1");
  EXPECT_EQ(header_value(std::string("t\0\x7F%", 4)), "t%00%7F%25");
}

}  // namespace
}  // namespace pgjobd
