// HttpServer: /metrics, /healthz and /readyz over real HTTP, and bind failures.
#include "http/http_server.hpp"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "http/host_header.hpp"
#include "http/listener_stop.hpp"
#include "metrics/metrics.hpp"
#include "support/metrics_text.hpp"
#include "support/silent_client.hpp"

namespace pgjobd {
namespace {

struct Response {
  long status = 0;
  std::string body;
};

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

Response get(int port, const std::string& path) {
  Response response;
  CURL* curl = curl_easy_init();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  const CURLcode code = curl_easy_perform(curl);
  EXPECT_EQ(code, CURLE_OK) << curl_easy_strerror(code);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  curl_easy_cleanup(curl);
  return response;
}

// A readiness answer the test can change while the server runs.
class FlippableProbe {
 public:
  void set(std::string reason) {
    std::lock_guard lock(mutex_);
    reason_ = std::move(reason);
  }
  std::string operator()() const {
    std::lock_guard lock(mutex_);
    return reason_;
  }

 private:
  mutable std::mutex mutex_;
  std::string reason_;
};

// One server for the whole suite (two of the tests start a second one).
class HttpServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    metrics_ = std::make_unique<Metrics>(std::vector<std::string>{"default"},
                                         std::vector<std::string>{"a"});
    probe_ = std::make_unique<FlippableProbe>();
    server_ = std::make_unique<HttpServer>("127.0.0.1:0", metrics_->collectable(),
                                           [] { return (*probe_)(); });
  }
  static void TearDownTestSuite() {
    server_.reset();
    probe_.reset();
    metrics_.reset();
  }
  void SetUp() override { probe_->set(""); }

  static inline std::unique_ptr<Metrics> metrics_;
  static inline std::unique_ptr<FlippableProbe> probe_;
  static inline std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, BindsAFreePort) { EXPECT_GT(server_->port(), 0); }

TEST_F(HttpServerTest, ServesMetrics) {
  metrics_->job_finished("default", "a", Outcome::kDone, 0.1);
  const Response response = get(server_->port(), "/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_NE(response.body.find("pgjobd_build_info{version="), std::string::npos) << response.body;
  EXPECT_NE(response.body.find(R"(pgjobd_jobs_total{outcome="done",queue="default",type="a"} 1)"),
            std::string::npos);
}

// prometheus-cpp's own series about /metrics are listed in the README's table too.
TEST_F(HttpServerTest, ExposerSeriesAreInTheReadme) {
  const std::set<std::string> documented = testing::readme_metric_names();
  const Response response = get(server_->port(), "/metrics");
  int exposer = 0;
  for (const std::string& family : testing::families_in(response.body)) {
    if (!family.starts_with("exposer_")) continue;
    ++exposer;
    EXPECT_TRUE(documented.contains(family)) << family << " is not in README.md's metrics table";
  }
  EXPECT_GT(exposer, 0) << response.body;
}

// Liveness is not readiness: a database that is unreachable leaves the daemon alive.
TEST_F(HttpServerTest, HealthzIgnoresTheReadinessProbe) {
  probe_->set("database unreachable");
  const Response response = get(server_->port(), "/healthz");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "ok\n");
}

// A wedged loop fails liveness, with the reason, so a supervisor restarts the daemon.
TEST_F(HttpServerTest, HealthzFollowsTheLivenessProbe) {
  FlippableProbe liveness;
  HttpServer server(
      "127.0.0.1:0", metrics_->collectable(), [] { return std::string(); },
      [&liveness] { return liveness(); });
  EXPECT_EQ(get(server.port(), "/healthz").status, 200);
  liveness.set("fetcher: a database call has not returned for 75s");
  const Response response = get(server.port(), "/healthz");
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.body, "fetcher: a database call has not returned for 75s\n");
  EXPECT_EQ(get(server.port(), "/readyz").status, 200);
}

TEST_F(HttpServerTest, ReadyzFollowsTheProbe) {
  Response response = get(server_->port(), "/readyz");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "ready\n");

  probe_->set("schema is at version 2, expected 3");
  response = get(server_->port(), "/readyz");
  EXPECT_EQ(response.status, 503);
  EXPECT_EQ(response.body, "schema is at version 2, expected 3\n");

  probe_->set("");
  EXPECT_EQ(get(server_->port(), "/readyz").status, 200);
}

TEST_F(HttpServerTest, UnknownPathIsNotFound) {
  EXPECT_EQ(get(server_->port(), "/nope").status, 404);
}

// README "HTTP endpoints": bound to loopback, a foreign Host (a DNS-rebinding page) gets
// 403; a loopback one, or none, the answer, which browsers must not sniff.
TEST_F(HttpServerTest, OnLoopbackAnswersOnlyALoopbackHostAndForbidsSniffing) {
  const std::string port = std::to_string(server_->port());
  const std::string own = testing::raw_exchange(
      server_->port(), "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:" + port + "\r\n\r\n");
  EXPECT_TRUE(own.starts_with("HTTP/1.1 200")) << own;
  EXPECT_NE(own.find("\r\nX-Content-Type-Options: nosniff\r\n"), std::string::npos) << own;
  const std::string foreign = testing::raw_exchange(
      server_->port(), "GET /metrics HTTP/1.1\r\nHost: evil.example:" + port + "\r\n\r\n");
  EXPECT_TRUE(foreign.starts_with("HTTP/1.1 403")) << foreign;
  EXPECT_EQ(foreign.find("pgjobd_"), std::string::npos) << foreign;
}

TEST(LoopbackHost, NamesLoopbackListenAddressesAndHostHeaders) {
  for (const char* loopback :
       {"127.0.0.1:9464", "127.1.2.3", "localhost:9464", "LocalHost", "[::1]:9464", "[::1]"}) {
    EXPECT_TRUE(is_loopback_host_header(loopback)) << loopback;
  }
  for (const char* other : {"0.0.0.0:9464", "9464", "[::]:9464", "10.0.0.1:9464",
                            "127.0.0.1.evil.example", "localhost.evil.example:80", "[::1]x"}) {
    EXPECT_FALSE(is_loopback_host_header(other)) << other;
  }
}

TEST_F(HttpServerTest, ThrowingProbeIsNotReady) {
  HttpServer server("127.0.0.1:0", metrics_->collectable(),
                    []() -> std::string { throw std::runtime_error("boom"); });
  const Response response = get(server.port(), "/readyz");
  EXPECT_EQ(response.status, 503);
  EXPECT_NE(response.body.find("boom"), std::string::npos) << response.body;
}

TEST_F(HttpServerTest, TwoServersAnswerWithTheirOwnProbes) {
  HttpServer other("127.0.0.1:0", metrics_->collectable(), [] { return std::string("other"); });
  EXPECT_EQ(get(server_->port(), "/readyz").status, 200);
  EXPECT_EQ(get(other.port(), "/readyz").body, "other\n");
}

TEST_F(HttpServerTest, OccupiedPortThrowsNamingTheAddress) {
  const std::string address = "127.0.0.1:" + std::to_string(server_->port());
  try {
    HttpServer second(address, metrics_->collectable(), [] { return std::string(); });
    FAIL() << "bound an occupied port";
  } catch (const std::runtime_error& e) {
    // Which address and why, not civetweb's "null context when constructing CivetServer".
    EXPECT_NE(
        std::string(e.what()).find("cannot listen on " + address + ": address already in use"),
        std::string::npos)
        << e.what();
  }
  // The first server is unaffected.
  EXPECT_EQ(get(server_->port(), "/readyz").status, 200);
}

// Right after a request, civetweb's listening thread has just begun a 2 s wait for the
// next connection and would notice a stop only after it (http/listener_stop.hpp): the
// daemon's exit took 2 s after its drain. Both a specific and a wildcard address.
TEST_F(HttpServerTest, StopsWithoutWaitingOutCivetwebsPoll) {
  for (const std::string listen : {"127.0.0.1:0", "0.0.0.0:0"}) {
    auto other =
        std::make_unique<HttpServer>(listen, metrics_->collectable(), [] { return std::string(); });
    EXPECT_EQ(get(other->port(), "/healthz").status, 200) << listen;
    const auto before = std::chrono::steady_clock::now();
    other.reset();
    const double stop =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    EXPECT_LT(stop, 1.0) << listen << ": the stop took " << stop << " s";
  }
}

// A client holds a connection without sending on it, nothing or half a request (a
// scraper's stalled request): the worker that took it waits for the rest in 2 s polls and
// mg_stop waits for that worker (http/listener_stop.hpp). The stop ends the wait: it takes
// milliseconds, not up to 2 s (1.9-2.0 s before).
TEST_F(HttpServerTest, StopsWhileAClientHoldsAConnectionSilently) {
  for (const std::string sent : {"", "GET /metrics HTTP/1.1\r\nHo"}) {
    auto other = std::make_unique<HttpServer>("127.0.0.1:0", metrics_->collectable(),
                                              [] { return std::string(); });
    const pgjobd::testing::SilentClient client(other->port(), sent);
    ASSERT_TRUE(client.connected());
    // civetweb hands accepted connections to its two workers in order: once a later request
    // is answered, a worker holds the silent one.
    EXPECT_EQ(get(other->port(), "/healthz").status, 200);
    const auto before = std::chrono::steady_clock::now();
    other.reset();
    const double stop =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    // Without the stop's signal a silent client holds it for civetweb's 2 s poll quantum;
    // 1 s leaves room for a loaded machine under TSan (0.52 s seen there once).
    EXPECT_LT(stop, 1.0) << "sent '" << sent << "': the stop took " << stop << " s";
  }
}

TEST(KnockAddress, ReachesTheListenerOrLoopbackForAWildcard) {
  EXPECT_EQ(knock_address("127.0.0.1:9187"), "127.0.0.1");
  EXPECT_EQ(knock_address("10.1.2.3:0"), "10.1.2.3");
  EXPECT_EQ(knock_address("0.0.0.0:9187"), "127.0.0.1");
  EXPECT_EQ(knock_address("localhost:8080"), "127.0.0.1");
  EXPECT_EQ(knock_address("9187"), "127.0.0.1");
  EXPECT_EQ(knock_address("[::]:9187"), "::1");
  EXPECT_EQ(knock_address("[::1]:9187"), "::1");
  EXPECT_EQ(knock_address("[fd00::5]:80"), "fd00::5");
}

}  // namespace
}  // namespace pgjobd
