// The dashboard over HTTP (src/ui/ui_server, src/ui/dashboard): a real server on a free
// loopback port, a fake store behind it, libcurl in front. Login, sessions, the cross-site
// checks, roles, the store calls of actions, error pages and page sizes.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/fake_ui_store.hpp"
#include "support/silent_client.hpp"
#include "ui/auth.hpp"
#include "ui/dashboard.hpp"
#include "ui/ui_server.hpp"

namespace pgjobd::ui {
namespace {

using testing::FakeUiStore;

struct HttpResult {
  long status = 0;
  std::multimap<std::string, std::string> headers;  // names in lower case
  std::string body;

  std::string header(const std::string& name) const {
    auto found = headers.find(name);
    return found == headers.end() ? "" : found->second;
  }
};

size_t write_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

size_t write_header(char* data, size_t size, size_t count, void* out) {
  std::string line(data, size * count);
  const std::size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
    static_cast<std::multimap<std::string, std::string>*>(out)->emplace(name, value);
  }
  return size * count;
}

// The csrf token of the first form on a page.
std::string csrf_of(const std::string& html) {
  std::smatch match;
  static const std::regex kToken("name=\"csrf\" value=\"([0-9a-f]+)\"");
  return std::regex_search(html, match, kToken) ? match[1].str() : "";
}

std::string hash_of(const std::string& password) {
  static std::map<std::string, std::string> hashes;  // yescrypt is slow on purpose
  auto& hash = hashes[password];
  if (hash.empty()) hash = hash_password(password);
  return hash;
}

class UiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.listen = "127.0.0.1:0";
    config_.users["alice"] = {hash_of("alice-secret"), "operator"};
    config_.users["bob"] = {hash_of("bob-secret"), "read_only"};
    store_ = std::make_unique<FakeUiStore>();
    fake_ = store_.get();
    QueueOverview queue;
    queue.queue = "default";
    queue.pending = {10000, true};
    queue.done = {1234, false};
    fake_->overview_data.queues.push_back(queue);
    fake_->queue_data.push_back({"default", false, ""});
    fake_->queue_data.push_back({"mail/eu", true, "2026-12-01T10:00:00Z"});
    fake_->job_data.push_back(FakeUiStore::make_job(3, "resize", "failed"));
    fake_->job_data.push_back(FakeUiStore::make_job(5, "resize", "dead"));
    fake_->job_data.push_back(FakeUiStore::make_job(8, "email", "pending"));
  }

  void start() {
    if (!store_) return;
    server_ = std::make_unique<UiServer>(config_, std::move(store_));
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
  }

  // One request; POSTs carry this server's Origin unless `headers` gives another.
  HttpResult request(const std::string& method, const std::string& path,
                     const std::string& body = "", std::vector<std::string> headers = {},
                     const std::string& cookie = "") {
    start();
    CURL* curl = curl_easy_init();
    HttpResult result;
    const std::string url = base_ + path;
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &write_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &result.body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &write_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &result.headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    if (method == "POST") {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
      bool has_origin = false;
      for (const std::string& h : headers) has_origin = has_origin || h.starts_with("Origin");
      if (!has_origin) headers.push_back("Origin: " + base_);
    } else if (method == "HEAD") {
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (method != "GET") {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
    }
    const std::string cookies =
        cookie.empty() ? "" : session_cookie_name(server_->port()) + "=" + cookie;
    if (!cookies.empty()) curl_easy_setopt(curl, CURLOPT_COOKIE, cookies.c_str());
    curl_slist* list = nullptr;
    for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    const CURLcode code = curl_easy_perform(curl);
    EXPECT_EQ(code, CURLE_OK) << curl_easy_strerror(code);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
    curl_slist_free_all(list);
    curl_easy_cleanup(curl);
    return result;
  }

  HttpResult get(const std::string& path, const std::string& cookie = "") {
    return request("GET", path, "", {}, cookie);
  }
  HttpResult post(const std::string& path, const std::string& body, const std::string& cookie,
                  std::vector<std::string> headers = {}) {
    return request("POST", path, body, std::move(headers), cookie);
  }

  // Logs in and returns the session id from the cookie.
  std::string login(const std::string& user, const std::string& password) {
    HttpResult result = post("/login", "user=" + user + "&password=" + password, "");
    EXPECT_EQ(result.status, 303) << result.body;
    std::smatch match;
    const std::string cookie = result.header("set-cookie");
    const std::regex cookie_pattern(session_cookie_name(server_->port()) + "=([0-9a-f]+);");
    EXPECT_TRUE(std::regex_search(cookie, match, cookie_pattern)) << cookie;
    return match.size() > 1 ? match[1].str() : "";
  }

  UiConfig config_;
  std::unique_ptr<FakeUiStore> store_;
  FakeUiStore* fake_ = nullptr;
  std::unique_ptr<UiServer> server_;
  std::string base_;
};

TEST_F(UiServerTest, PagesNeedALogin) {
  for (const char* path : {"/", "/jobs", "/jobs/3", "/queues", "/audit", "/schedules"}) {
    HttpResult result = get(path);
    EXPECT_EQ(result.status, 303) << path;
    EXPECT_EQ(result.header("location"), "/login") << path;
  }
  HttpResult page = get("/login");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("id=\"login-form\""), std::string::npos);
  EXPECT_NE(page.body.find("name=\"user\""), std::string::npos);
  EXPECT_NE(page.body.find("name=\"password\""), std::string::npos);
  EXPECT_NE(page.body.find("id=\"login-submit\""), std::string::npos);
  EXPECT_NE(page.body.find("data-page=\"login\""), std::string::npos);
  EXPECT_EQ(get("/ui/app.css").status, 200) << "assets need no login (the login page uses them)";
}

TEST_F(UiServerTest, WrongPasswordIs401AndSetsNoCookie) {
  for (const std::string body :
       {"user=alice&password=wrong", "user=nobody&password=alice-secret", "user=alice"}) {
    HttpResult result = post("/login", body, "");
    EXPECT_EQ(result.status, 401) << body;
    EXPECT_NE(result.body.find("id=\"login-error\""), std::string::npos) << body;
    EXPECT_EQ(result.header("set-cookie"), "") << body;
  }
}

TEST_F(UiServerTest, RepeatedFailedLoginsAreThrottled) {
  for (int i = 0; i < LoginThrottle::kMaxFailuresPerAddress; ++i) {
    EXPECT_EQ(post("/login", "user=alice&password=guess" + std::to_string(i), "").status, 401);
  }
  HttpResult refused = post("/login", "user=alice&password=alice-secret", "");
  EXPECT_EQ(refused.status, 429) << "even the right password waits out the window";
  EXPECT_EQ(refused.header("retry-after"), "300");
  EXPECT_EQ(refused.header("set-cookie"), "");
}

TEST_F(UiServerTest, LoginSetsAStrictHttpOnlyCookie) {
  HttpResult result = post("/login", "user=alice&password=alice-secret", "");
  ASSERT_EQ(result.status, 303) << result.body;
  EXPECT_EQ(result.header("location"), "/");
  const std::string cookie = result.header("set-cookie");
  EXPECT_TRUE(cookie.starts_with("pgjobd_session_" + std::to_string(server_->port()) + "="))
      << cookie;
  EXPECT_NE(cookie.find("; HttpOnly"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("; SameSite=Strict"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("; Path=/"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("; Max-Age=43200"), std::string::npos) << cookie;
}

TEST_F(UiServerTest, LoginFromAForeignOriginIsRefused) {
  HttpResult result =
      post("/login", "user=alice&password=alice-secret", "", {"Origin: http://evil.example"});
  EXPECT_EQ(result.status, 403);
  EXPECT_EQ(result.header("set-cookie"), "");
}

TEST_F(UiServerTest, OverviewWithSecurityHeadersAndBoundedCounts) {
  const std::string session = login("alice", "alice-secret");
  HttpResult result = get("/", session);
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.header("content-security-policy").find("default-src 'self'"), 0u);
  EXPECT_NE(result.header("content-security-policy").find("frame-ancestors 'none'"),
            std::string::npos);
  EXPECT_EQ(result.header("x-content-type-options"), "nosniff");
  EXPECT_EQ(result.header("cache-control"), "no-store");
  const std::string& html = result.body;
  EXPECT_NE(html.find("data-page=\"overview\""), std::string::npos);
  EXPECT_NE(html.find("<span id=\"whoami\">alice</span>"), std::string::npos);
  EXPECT_NE(html.find("id=\"queues-table\""), std::string::npos);
  EXPECT_NE(html.find("<tr data-queue=\"default\">"), std::string::npos);
  EXPECT_NE(html.find(">10,000+<"), std::string::npos) << html;
  EXPECT_NE(html.find(">1,234<"), std::string::npos) << html;
  EXPECT_NE(html.find("<svg id=\"throughput-chart\""), std::string::npos);
  EXPECT_NE(html.find("id=\"daemons-table\""), std::string::npos);
  EXPECT_EQ(html.find("nav-schedules"), std::string::npos) << "no schedules, no link";
  EXPECT_EQ(html.find("http://"), std::string::npos) << "no external URL";
  EXPECT_EQ(html.find("https://"), std::string::npos) << "no external URL";
}

TEST_F(UiServerTest, GoodPostCallsTheStoreAndRedirectsWithAFlash) {
  const std::string session = login("alice", "alice-secret");
  const std::string token = csrf_of(get("/jobs/3", session).body);
  ASSERT_FALSE(token.empty());
  HttpResult result = post("/jobs/3/retry", "csrf=" + token, session);
  EXPECT_EQ(result.status, 303) << result.body;
  EXPECT_EQ(result.header("location"), "/jobs/3");
  std::vector<FakeUiStore::Call> calls = fake_->calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].action, "retry");
  EXPECT_EQ(calls[0].ids, std::vector<std::int64_t>{3});
  EXPECT_EQ(calls[0].actor.user, "alice");
  EXPECT_EQ(calls[0].actor.remote_address, "127.0.0.1");
  HttpResult after = get("/jobs/3", session);
  EXPECT_NE(after.body.find("<p id=\"flash\" role=\"status\">retry done (fake)</p>"),
            std::string::npos)
      << after.body;
  EXPECT_EQ(get("/jobs/3", session).body.find("id=\"flash\""), std::string::npos)
      << "a flash is shown once";
}

TEST_F(UiServerTest, BulkActionsAndCancelReasonAndQueueNamesWithSlashes) {
  const std::string session = login("alice", "alice-secret");
  const std::string token = csrf_of(get("/jobs", session).body);
  HttpResult bulk = post(
      "/jobs/bulk",
      "csrf=" + token + "&action=cancel&id=3&id=5&reason=too+old&back=%2Fjobs%3Fstatus%3Dfailed",
      session);
  EXPECT_EQ(bulk.status, 303) << bulk.body;
  EXPECT_EQ(bulk.header("location"), "/jobs?status=failed");
  HttpResult foreign_back =
      post("/jobs/bulk", "csrf=" + token + "&action=retry&id=8&back=%2F%2Fevil.example", session);
  EXPECT_EQ(foreign_back.header("location"), "/jobs") << "never an open redirect";
  HttpResult pause = post("/queues/mail%2Feu/resume", "csrf=" + token, session);
  EXPECT_EQ(pause.status, 303) << pause.body;
  EXPECT_EQ(pause.header("location"), "/queues");
  std::vector<FakeUiStore::Call> calls = fake_->calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].action, "cancel");
  EXPECT_EQ(calls[0].ids, (std::vector<std::int64_t>{3, 5}));
  EXPECT_EQ(calls[0].reason, "too old");
  EXPECT_EQ(calls[1].action, "retry");
  EXPECT_EQ(calls[1].ids, std::vector<std::int64_t>{8});
  EXPECT_EQ(calls[2].action, "resume_queue");
  EXPECT_EQ(calls[2].target, "mail/eu");
  EXPECT_EQ(post("/jobs/bulk", "csrf=" + token + "&action=retry&id=x", session).status, 400);
  EXPECT_EQ(post("/jobs/bulk", "csrf=" + token + "&action=delete&id=3", session).status, 400);
  EXPECT_EQ(fake_->calls().size(), 3u);
}

TEST_F(UiServerTest, PostWithoutOrWithAWrongTokenIs403AndChangesNothing) {
  const std::string session = login("alice", "alice-secret");
  const std::string token = csrf_of(get("/jobs", session).body);
  EXPECT_EQ(post("/jobs/3/retry", "", session).status, 403);
  EXPECT_EQ(post("/jobs/3/retry", "csrf=", session).status, 403);
  EXPECT_EQ(post("/jobs/3/retry", "csrf=" + token + "0", session).status, 403);
  EXPECT_EQ(post("/queues/default/pause", "csrf=" + token, "").status, 403) << "no session";
  const std::string other = login("alice", "alice-secret");
  EXPECT_EQ(post("/jobs/3/retry", "csrf=" + token, other).status, 403)
      << "a token belongs to its session";
  EXPECT_TRUE(fake_->calls().empty());
}

TEST_F(UiServerTest, PostFromAForeignOriginIs403AndChangesNothing) {
  const std::string session = login("alice", "alice-secret");
  const std::string token = csrf_of(get("/jobs", session).body);
  const std::string body = "csrf=" + token;
  EXPECT_EQ(post("/jobs/3/retry", body, session, {"Origin: http://evil.example"}).status, 403);
  EXPECT_EQ(post("/jobs/3/retry", body, session, {"Origin: http://127.0.0.1:1"}).status, 403);
  // No Origin: the Referer decides; neither: refused.
  EXPECT_EQ(
      post("/jobs/3/retry", body, session, {"Origin:", "Referer: http://evil.example/x"}).status,
      403);
  EXPECT_EQ(post("/jobs/3/retry", body, session, {"Origin:"}).status, 403);
  EXPECT_TRUE(fake_->calls().empty());
  EXPECT_EQ(
      post("/jobs/3/retry", body, session, {"Origin:", "Referer: " + base_ + "/jobs/3"}).status,
      303);
  EXPECT_EQ(fake_->calls().size(), 1u);
}

TEST_F(UiServerTest, ReadOnlySeesNoButtonsAndIsRefused) {
  fake_->schedule_data.push_back(
      {"nightly", "30 2 * * * UTC", "report", "default", true, false, "", ""});
  const std::string session = login("bob", "bob-secret");
  for (const char* path : {"/jobs", "/jobs/3", "/queues", "/schedules"}) {
    HttpResult page = get(path, session);
    ASSERT_EQ(page.status, 200) << path;
    for (const char* button : {"bulk-form", "bulk-retry", "retry-button", "cancel-button",
                               "pause-button", "resume-button", "type=\"checkbox\""}) {
      EXPECT_EQ(page.body.find(button), std::string::npos) << path << " shows " << button;
    }
  }
  const std::string token = csrf_of(get("/", session).body);  // the logout form's
  ASSERT_FALSE(token.empty());
  for (const char* path : {"/jobs/3/retry", "/jobs/8/cancel", "/jobs/bulk", "/queues/default/pause",
                           "/schedules/nightly/pause"}) {
    EXPECT_EQ(post(path, "csrf=" + token + "&action=retry&id=3", session).status, 403) << path;
  }
  EXPECT_TRUE(fake_->calls().empty());
}

TEST_F(UiServerTest, HostileJobFieldsAreEscaped) {
  JobDetail job = FakeUiStore::make_job(42, "<script>alert('type')</script>", "failed");
  job.summary.last_error = "<img src=x onerror=alert(1)>";
  job.payload_json = "{\"html\": \"</pre><script>alert(2)</script>\"}";
  fake_->job_data.push_back(job);
  const std::string session = login("alice", "alice-secret");
  for (const char* path : {"/jobs", "/jobs/42", "/jobs?type=%3Cscript%3E"}) {
    HttpResult page = get(path, session);
    EXPECT_EQ(page.body.find("<script>"), std::string::npos) << path;
    EXPECT_EQ(page.body.find("<img"), std::string::npos) << path;
  }
  const std::string detail = get("/jobs/42", session).body;
  EXPECT_NE(detail.find("&lt;script&gt;alert(&#39;type&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(detail.find("<pre id=\"job-payload\">{\n    &quot;html&quot;: &quot;&lt;/pre&gt;"),
            std::string::npos)
      << detail;
}

TEST_F(UiServerTest, NotFoundBadRequestAndDatabaseDown) {
  const std::string session = login("alice", "alice-secret");
  EXPECT_EQ(get("/jobs/999", session).status, 404);
  EXPECT_EQ(get("/jobs/abc", session).status, 404);
  EXPECT_EQ(get("/jobs/-1", session).status, 404);
  EXPECT_EQ(get("/nothing-here", session).status, 404);
  HttpResult bad_status = get("/jobs?status=bogus", session);
  EXPECT_EQ(bad_status.status, 400);
  EXPECT_NE(bad_status.body.find("status: unknown status &#39;bogus&#39;"), std::string::npos)
      << bad_status.body;
  HttpResult bad_before = get("/jobs?before=12x", session);
  EXPECT_EQ(bad_before.status, 400);
  EXPECT_NE(bad_before.body.find("before: not a job id"), std::string::npos);
  EXPECT_EQ(get("/jobs?id=0", session).status, 400);
  EXPECT_EQ(get("/jobs?limit=201", session).status, 400);
  fake_->fail = true;
  for (const char* path : {"/", "/jobs", "/jobs/3", "/queues", "/audit"}) {
    HttpResult down = get(path, session);
    EXPECT_EQ(down.status, 503) << path;
    EXPECT_NE(down.body.find("database is unavailable"), std::string::npos) << down.body;
  }
  const std::string token = csrf_of(get("/", session).body);
  EXPECT_EQ(post("/jobs/3/retry", "csrf=" + token, session).status, 503);
}

// `pgjobd ui` alone has nothing else to probe: /healthz and /readyz answer without a login
// (and without a loopback Host), /readyz 503 with the reason while the store cannot reach
// the database.
TEST_F(UiServerTest, HealthAndReadinessAnswerWithoutALogin) {
  HttpResult health = get("/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(health.body, "ok\n");
  HttpResult ready = request("GET", "/readyz", "", {"Host: dashboard.example"});
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(ready.body, "ready\n");

  fake_->fail = true;
  ready = get("/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.body, "database: connection refused (fake)\n");
  EXPECT_EQ(get("/healthz").status, 200);  // the process still serves
}

// An occupied port: the address and why, not civetweb's silence.
TEST_F(UiServerTest, OccupiedPortNamesTheAddressAndWhy) {
  start();
  config_.listen = "127.0.0.1:" + std::to_string(server_->port());
  try {
    UiServer second(config_, std::make_unique<FakeUiStore>());
    FAIL() << "bound an occupied port";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "dashboard: cannot listen on " + config_.listen + ": address already in use");
  }
}

// civetweb waits for a connection up to 2 s at a time and checks for a stop only between
// waits; right after a request that wait has just begun. The server knocks on its own port,
// on a wildcard listener through loopback, so a stop takes milliseconds, not up to 2 s
// (each test of this file took 2.1 s before).
TEST_F(UiServerTest, StopsWithoutWaitingOutCivetwebsPoll) {
  for (const std::string listen : {"127.0.0.1:0", "0.0.0.0:0"}) {
    config_.listen = listen;
    store_ = std::make_unique<FakeUiStore>();
    EXPECT_EQ(get("/login").status, 200) << listen;
    const auto before = std::chrono::steady_clock::now();
    server_.reset();
    const double stop =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    EXPECT_LT(stop, 1.0) << listen << ": the stop took " << stop << " s";
  }
}

// Clients hold connections without sending on them (a browser's idle or preconnected
// socket, nothing or half a request): the workers that took them wait for the rest in 2 s
// polls and mg_stop waits for them (http/listener_stop.hpp). The stop ends the waits: it
// takes milliseconds, not up to 2 s (1.9-2.0 s before).
TEST_F(UiServerTest, StopsWhileClientsHoldConnectionsSilently) {
  start();
  const testing::SilentClient idle(server_->port(), "");
  const testing::SilentClient half(server_->port(), "GET /login HTTP/1.1\r\nHost: te");
  ASSERT_TRUE(idle.connected() && half.connected());
  // civetweb hands accepted connections to its four workers in order: once a later request
  // is answered, a worker holds each silent one.
  EXPECT_EQ(get("/login").status, 200);
  const auto before = std::chrono::steady_clock::now();
  server_.reset();
  const double stop =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  // Without the stop's signal: civetweb's 2 s poll quantum; 1 s leaves room for a loaded
  // machine under TSan.
  EXPECT_LT(stop, 1.0) << "the stop took " << stop << " s";
}

TEST_F(UiServerTest, PageWithTwoHundredJobsStaysUnder150KB) {
  for (int i = 100; i < 400; ++i) {
    // The worst a row can be: every text at its longest, all of it escaped six-fold.
    JobDetail job = FakeUiStore::make_job(i, std::string(200, '"'), "failed");
    job.summary.last_error = std::string(200, '"');
    job.summary.queue = std::string(200, '"');
    fake_->job_data.push_back(job);
  }
  const std::string session = login("alice", "alice-secret");
  HttpResult page = get("/jobs?limit=200", session);
  ASSERT_EQ(page.status, 200);
  std::size_t rows = 0;
  for (std::size_t at = 0; (at = page.body.find("<tr data-job-id=", at)) != std::string::npos; ++at)
    ++rows;
  EXPECT_EQ(rows, 200u);
  const std::size_t total =
      page.body.size() + get("/ui/app.css").body.size() + get("/ui/app.js").body.size();
  EXPECT_LT(total, 150u * 1024) << "page + css + js";
  EXPECT_GT(get("/ui/app.js").body.size(), 100u);
}

TEST_F(UiServerTest, JobPageStaysUnder150KBWithAHugePayloadAndManyAttempts) {
  JobDetail job = FakeUiStore::make_job(77, "big", "failed");
  job.payload_json = "\"" + std::string(1024 * 1024, 'p') + "\"";
  job.attempts.clear();
  for (int i = 1; i <= 300; ++i) {
    AttemptInfo attempt;
    attempt.attempt = i;
    attempt.error = std::string(10000, '<');
    job.attempts.push_back(attempt);
  }
  fake_->job_data.push_back(job);
  const std::string session = login("alice", "alice-secret");
  HttpResult page = get("/jobs/77", session);
  ASSERT_EQ(page.status, 200);
  const std::size_t total =
      page.body.size() + get("/ui/app.css").body.size() + get("/ui/app.js").body.size();
  EXPECT_LT(total, 150u * 1024);
  EXPECT_NE(page.body.find("… (cut: the page shows the first 49,152 bytes)"), std::string::npos);
  EXPECT_NE(page.body.find("<tr data-attempt=\"300\">"), std::string::npos) << "latest shown";
  EXPECT_EQ(page.body.find("<tr data-attempt=\"280\">"), std::string::npos);
  EXPECT_NE(page.body.find("The last 20 of 300 attempts."), std::string::npos);
}

TEST_F(UiServerTest, HiddenPayloads) {
  config_.show_payloads = false;
  const std::string session = login("alice", "alice-secret");
  HttpResult page = get("/jobs/3", session);
  EXPECT_EQ(page.body.find("job-payload"), std::string::npos);
  EXPECT_NE(page.body.find("id=\"payload-hidden\""), std::string::npos);
  EXPECT_EQ(page.body.find("\"n\""), std::string::npos);
  EXPECT_EQ(fake_->payload_requests(), std::vector<bool>{false});
}

TEST_F(UiServerTest, KeysetNextLinkKeepsTheFilters) {
  for (int i = 100; i < 160; ++i) fake_->job_data.push_back(FakeUiStore::make_job(i, "x", "done"));
  const std::string session = login("alice", "alice-secret");
  HttpResult first_page = get("/jobs?status=done&type=x", session);
  std::smatch match;
  static const std::regex kNext("id=\"next-page\" href=\"([^\"]+)\"");
  ASSERT_TRUE(std::regex_search(first_page.body, match, kNext)) << first_page.body;
  EXPECT_EQ(match[1].str(), "/jobs?status=done&amp;type=x&amp;before=110");
  HttpResult second = get("/jobs?status=done&type=x&before=110", session);
  EXPECT_NE(second.body.find("data-job-id=\"109\""), std::string::npos);
  EXPECT_EQ(second.body.find("data-job-id=\"110\""), std::string::npos);
  EXPECT_EQ(second.body.find("next-page"), std::string::npos);
  ASSERT_EQ(fake_->filters().size(), 2u);
  EXPECT_EQ(fake_->filters()[1].before_id, std::optional<std::int64_t>(110));
  EXPECT_EQ(fake_->filters()[1].status, std::optional<std::string>("done"));
}

TEST_F(UiServerTest, LimitsAndSchedulesShowWhenThereAreAny) {
  const std::string session = login("alice", "alice-secret");
  EXPECT_EQ(get("/queues", session).body.find("limits-table"), std::string::npos);
  server_.reset();
  store_ = std::make_unique<FakeUiStore>();
  fake_ = store_.get();
  fake_->limit_data.push_back({"per_user", "types [a], key user, concurrency 3", 2, 1});
  fake_->schedule_data.push_back(
      {"nightly", "30 2 * * * UTC", "report", "default", true, true, "", "2026-12-02T02:30:00Z"});
  const std::string again = login("alice", "alice-secret");
  EXPECT_NE(get("/queues", again).body.find("id=\"limits-table\""), std::string::npos);
  const std::string schedules = get("/schedules", again).body;
  EXPECT_NE(schedules.find("<tr data-schedule=\"nightly\">"), std::string::npos);
  EXPECT_NE(schedules.find("class=\"resume-button\""), std::string::npos) << "it is paused";
  EXPECT_NE(get("/", again).body.find("id=\"nav-schedules\""), std::string::npos);
}

TEST_F(UiServerTest, LogoutAndRemovedUsersEndSessions) {
  const std::string session = login("alice", "alice-secret");
  const std::string token = csrf_of(get("/", session).body);
  HttpResult out = post("/logout", "csrf=" + token, session);
  EXPECT_EQ(out.status, 303);
  EXPECT_EQ(out.header("location"), "/login");
  EXPECT_NE(out.header("set-cookie").find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(get("/", session).status, 303);

  const std::string bob = login("bob", "bob-secret");
  EXPECT_EQ(get("/", bob).status, 200);
  UiConfig without_bob = config_;
  without_bob.users.erase("bob");
  server_->apply(without_bob);
  EXPECT_EQ(get("/", bob).status, 303) << "a reload that removes a user ends their sessions";
}

TEST_F(UiServerTest, AChangedPasswordHashEndsThatUsersSessionsOnly) {
  const std::string alice = login("alice", "alice-secret");
  const std::string bob = login("bob", "bob-secret");
  UiConfig changed = config_;
  changed.users["alice"].password_hash = hash_of("alice-new");
  server_->apply(changed);
  EXPECT_EQ(get("/", alice).status, 303) << "a session made with the old password is over";
  EXPECT_EQ(get("/", bob).status, 200);
  EXPECT_EQ(get("/", login("alice", "alice-new")).status, 200);
}

// Logging in as oneself between guesses at another user's password resets no count.
TEST_F(UiServerTest, OwnLoginsBetweenGuessesDoNotResetTheThrottle) {
  int refused_at = 0;
  for (int i = 1; i <= 3 * LoginThrottle::kMaxFailuresPerAddress && refused_at == 0; ++i) {
    const long guess = post("/login", "user=alice&password=guess" + std::to_string(i), "").status;
    if (guess == 429) refused_at = i;
    post("/login", "user=bob&password=bob-secret", "");
  }
  EXPECT_EQ(refused_at, LoginThrottle::kMaxFailuresPerAddress + 1);
}

TEST_F(UiServerTest, EveryQueryParameterMustBeText) {
  const std::string session = login("alice", "alice-secret");
  for (const char* path : {"/jobs?queue=%ff%fe", "/jobs?type=%c0%af", "/jobs?status=%ff",
                           "/jobs?id=%ff", "/jobs?before=%00", "/jobs?limit=%ed%a0%80", "/?x=%ff",
                           "/queues?queue=a%00b", "/audit?%ff=1"}) {
    const HttpResult page = get(path, session);
    EXPECT_EQ(page.status, 400) << path << page.body;
  }
  const HttpResult queue = get("/jobs?queue=%ff%fe", session);
  EXPECT_NE(queue.body.find("queue: not valid UTF-8"), std::string::npos) << queue.body;
  EXPECT_TRUE(fake_->filters().empty()) << "no list was asked of the store";
  const std::string token = csrf_of(get("/jobs", session).body);
  EXPECT_EQ(post("/queues/%ff/pause", "csrf=" + token, session).status, 400);
  EXPECT_EQ(post("/jobs/3/cancel", "csrf=" + token + "&reason=%ff", session).status, 400);
  EXPECT_TRUE(fake_->calls().empty());
}

TEST_F(UiServerTest, NoUsersOnLoopbackMeansAnonymousOperator) {
  config_.users.clear();
  HttpResult page = get("/");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_NE(page.body.find("<span id=\"whoami\">anonymous</span>"), std::string::npos);
  EXPECT_EQ(page.body.find("logout-button"), std::string::npos);
  std::smatch match;
  const std::string cookie = page.header("set-cookie");
  const std::regex cookie_pattern(session_cookie_name(server_->port()) + "=([0-9a-f]+);");
  ASSERT_TRUE(std::regex_search(cookie, match, cookie_pattern)) << cookie;
  const std::string session = match[1].str();
  const std::string token = csrf_of(get("/jobs", session).body);
  EXPECT_EQ(post("/queues/default/pause", "csrf=" + token, session).status, 303);
  EXPECT_EQ(post("/queues/default/pause", "csrf=" + token, session, {"Origin: http://evil.example"})
                .status,
            403);
  ASSERT_EQ(fake_->calls().size(), 1u);
  EXPECT_EQ(fake_->calls()[0].actor.user, "anonymous");
  EXPECT_EQ(get("/login").header("location"), "/");
}

TEST_F(UiServerTest, LoopbackDashboardRefusesOtherHostNames) {
  config_.users.clear();
  HttpResult rebinding = request("GET", "/", "", {"Host: attacker.example:80"});
  EXPECT_EQ(rebinding.status, 403);
  EXPECT_EQ(rebinding.header("set-cookie"), "");
  EXPECT_EQ(request("GET", "/", "", {"Host: localhost:1"}).status, 200);
}

TEST_F(UiServerTest, AssetsAreServedWithTheirTypes) {
  HttpResult css = get("/ui/app.css");
  EXPECT_EQ(css.status, 200);
  EXPECT_EQ(css.header("content-type"), "text/css; charset=utf-8");
  HttpResult js = get("/ui/app.js");
  EXPECT_EQ(js.header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_NE(js.body.find("visibilityState"), std::string::npos);
  EXPECT_EQ(request("DELETE", "/jobs/3").status, 405);
  HttpResult head = request("HEAD", "/ui/app.css");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("content-length"), std::to_string(css.body.size()));
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(get("/favicon.ico").status, 204) << "no login redirect for the browser's icon";
}

}  // namespace
}  // namespace pgjobd::ui
