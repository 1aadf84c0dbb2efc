// Unit tests for the dashboard's building blocks: escaping and formatting (src/ui/html),
// the Origin/Referer/Host rules (src/ui/csrf), passwords and sessions (src/ui/auth), and
// the pages rendered from hostile data (src/ui/pages).
#include <gtest/gtest.h>

#include <string>

#include "support/fake_ui_store.hpp"
#include "ui/auth.hpp"
#include "ui/csrf.hpp"
#include "ui/html.hpp"
#include "ui/pages.hpp"

namespace pgjobd::ui {
namespace {

TEST(UiHtmlTest, EscapesEveryCharacterThatCanEndTextOrAnAttribute) {
  EXPECT_EQ(html_escape("<script>alert('x')</script>"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;");
  EXPECT_EQ(html_escape("\" onmouseover=\"alert(1)"), "&quot; onmouseover=&quot;alert(1)");
  EXPECT_EQ(html_escape("a & b &amp;"), "a &amp; b &amp;amp;");
  EXPECT_EQ(html_escape("</pre><img src=x onerror=alert(1)>"),
            "&lt;/pre&gt;&lt;img src=x onerror=alert(1)&gt;");
  EXPECT_EQ(html_escape("plain text, ünïcödé ✓"), "plain text, ünïcödé ✓");
  EXPECT_EQ(html_escape("line\nbreak\ttab"), "line\nbreak\ttab");
}

TEST(UiHtmlTest, ReplacesControlCharactersAndInvalidUtf8) {
  EXPECT_EQ(html_escape(std::string("a\0b", 3)),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(html_escape("\x1b[31mred"), "\xEF\xBF\xBD[31mred");
  // A lone lead byte must not swallow the '<' after it into a "character".
  EXPECT_EQ(html_escape("\xE2<b>"), "\xEF\xBF\xBD&lt;b&gt;");
  // Overlong '<' (C0 BC) and a UTF-16 surrogate (ED A0 80) are not UTF-8.
  EXPECT_EQ(html_escape("\xC0\xBC"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(html_escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(html_escape("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");  // emoji stays
}

TEST(UiHtmlTest, FormatsCountsWithThousandsSeparators) {
  EXPECT_EQ(format_thousands(0), "0");
  EXPECT_EQ(format_thousands(999), "999");
  EXPECT_EQ(format_thousands(1000), "1,000");
  EXPECT_EQ(format_thousands(1234567), "1,234,567");
  EXPECT_EQ(format_thousands(-1234), "-1,234");
  EXPECT_EQ(format_thousands(INT64_MIN), "-9,223,372,036,854,775,808");
  EXPECT_EQ(format_count({10000, true}), "10,000+");
  EXPECT_EQ(format_count({9999, false}), "9,999");
}

TEST(UiHtmlTest, FormatsAges) {
  EXPECT_EQ(format_age(0), "0s");
  EXPECT_EQ(format_age(42), "42s");
  EXPECT_EQ(format_age(95), "1m 35s");
  EXPECT_EQ(format_age(7200), "2h 0m");
  EXPECT_EQ(format_age(90000), "1d 1h");
}

TEST(UiHtmlTest, ParsesForms) {
  auto form = parse_form("a=1&id=3&id=5&b=x+y%2Fz&empty=&flag&bad=%zz");
  EXPECT_EQ(form["a"], std::vector<std::string>{"1"});
  EXPECT_EQ(form["id"], (std::vector<std::string>{"3", "5"}));
  EXPECT_EQ(form["b"], std::vector<std::string>{"x y/z"});
  EXPECT_EQ(form["empty"], std::vector<std::string>{""});
  EXPECT_EQ(form["flag"], std::vector<std::string>{""});
  EXPECT_EQ(form["bad"], std::vector<std::string>{"%zz"});
  EXPECT_EQ(url_encode("mail/eu & <x>"), "mail%2Feu%20%26%20%3Cx%3E");
  EXPECT_EQ(url_decode(url_encode("ä/€ ?&=")), "ä/€ ?&=");
}

TEST(UiCsrfTest, OriginMustBeThisServer) {
  EXPECT_TRUE(same_origin("http://127.0.0.1:9465", "127.0.0.1:9465"));
  EXPECT_TRUE(same_origin("https://dash.example", "dash.example"));
  EXPECT_TRUE(same_origin("http://127.0.0.1:9465/jobs?status=failed", "127.0.0.1:9465"));
  EXPECT_FALSE(same_origin("http://127.0.0.1:9466", "127.0.0.1:9465"));
  EXPECT_FALSE(same_origin("http://evil.example", "127.0.0.1:9465"));
  EXPECT_FALSE(same_origin("http://127.0.0.1:9465.evil.example", "127.0.0.1:9465"));
  EXPECT_FALSE(same_origin("http://127.0.0.1:9465@evil.example/", "127.0.0.1:9465"));
  EXPECT_FALSE(same_origin("ftp://127.0.0.1:9465", "127.0.0.1:9465"));
  EXPECT_FALSE(same_origin("http://127.0.0.1:9465", ""));
}

TEST(UiCsrfTest, OriginWinsOverRefererAndNeitherIsRefused) {
  const std::string host = "127.0.0.1:9465";
  EXPECT_TRUE(request_from_own_origin("http://127.0.0.1:9465", nullptr, host));
  EXPECT_FALSE(request_from_own_origin("http://evil.example", "http://127.0.0.1:9465/", host));
  EXPECT_TRUE(request_from_own_origin(nullptr, "http://127.0.0.1:9465/jobs", host));
  EXPECT_TRUE(request_from_own_origin("null", "http://127.0.0.1:9465/jobs", host));
  EXPECT_FALSE(request_from_own_origin("null", nullptr, host));
  EXPECT_FALSE(request_from_own_origin(nullptr, "http://evil.example/", host));
  EXPECT_FALSE(request_from_own_origin(nullptr, nullptr, host));
}

TEST(UiCsrfTest, LoopbackHostHeaders) {
  EXPECT_TRUE(is_loopback_host_header("127.0.0.1:9465"));
  EXPECT_TRUE(is_loopback_host_header("localhost:9465"));
  EXPECT_TRUE(is_loopback_host_header("[::1]:9465"));
  EXPECT_TRUE(is_loopback_host_header("127.0.0.1"));
  EXPECT_FALSE(is_loopback_host_header("evil.example:9465"));
  EXPECT_FALSE(is_loopback_host_header("127.0.0.1.evil.example:9465"));
  EXPECT_FALSE(is_loopback_host_header("[::1].evil:9465"));
}

TEST(UiAuthTest, HashesAndVerifiesPasswords) {
  const std::string hash = hash_password("correct horse");
  EXPECT_TRUE(hash.starts_with("$y$")) << hash;
  EXPECT_TRUE(verify_password(hash, "correct horse"));
  EXPECT_FALSE(verify_password(hash, "correct horse "));
  EXPECT_FALSE(verify_password(hash, ""));
  EXPECT_FALSE(verify_password("not a hash", "not a hash"));
  EXPECT_FALSE(verify_password("", ""));
  EXPECT_NE(hash_password("correct horse"), hash) << "each hash gets its own salt";
}

TEST(UiAuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(constant_time_equals("abc", "abc"));
  EXPECT_FALSE(constant_time_equals("abc", "abd"));
  EXPECT_FALSE(constant_time_equals("abc", "ab"));
  EXPECT_TRUE(constant_time_equals("", ""));
}

TEST(UiAuthTest, SessionsExpireAndMakeRoom) {
  SessionTable table(2);
  const Session a = table.create("alice", std::chrono::hours(1));
  EXPECT_EQ(a.id.size(), 64u);
  EXPECT_EQ(a.csrf.size(), 64u);
  EXPECT_NE(a.id, a.csrf);
  ASSERT_TRUE(table.find(a.id));
  EXPECT_EQ(table.find(a.id)->user, "alice");
  EXPECT_FALSE(table.find("nonsense"));
  const Session gone = table.create("bob", std::chrono::milliseconds(0));
  EXPECT_FALSE(table.find(gone.id)) << "a session past its TTL is not found";
  table.create("carol", std::chrono::hours(2));
  table.create("dave", std::chrono::hours(3));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_FALSE(table.find(a.id)) << "the session closest to expiry made room";
  table.set_flash(a.id, "ignored");
}

TEST(UiAuthTest, ThrottleCountsFailuresPerAddress) {
  LoginThrottle throttle;
  for (int i = 0; i < LoginThrottle::kMaxFailuresPerAddress - 1; ++i) {
    throttle.failed("10.0.0.1", "user" + std::to_string(i), false);
  }
  EXPECT_TRUE(throttle.allowed("10.0.0.1", "alice"));
  throttle.failed("10.0.0.1", "alice", true);
  EXPECT_FALSE(throttle.allowed("10.0.0.1", "alice"));
  EXPECT_FALSE(throttle.allowed("10.0.0.1", "mallory")) << "whatever name it tries next";
  EXPECT_TRUE(throttle.allowed("10.0.0.2", "alice")) << "per address";
}

TEST(UiAuthTest, ThrottleCountsFailuresPerUserFromEveryAddress) {
  LoginThrottle throttle;
  for (int i = 0; i < LoginThrottle::kMaxFailuresPerUser; ++i) {
    throttle.failed("10.0.1." + std::to_string(i), "alice", true);
  }
  EXPECT_FALSE(throttle.allowed("10.0.2.1", "alice")) << "a fresh address guessing alice";
  EXPECT_TRUE(throttle.allowed("10.0.2.1", "bob"));
}

TEST(UiAuthTest, ThrottleCountsAnIpv6HostByItsSlash64) {
  EXPECT_EQ(LoginThrottle::address_key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(LoginThrottle::address_key("2001:db8:1:2:bbbb::9"), "2001:db8:1:2::/64");
  EXPECT_EQ(LoginThrottle::address_key("10.0.0.1"), "10.0.0.1");
}

// A flood of addresses and made-up names stays within the table's bound and cannot evict
// the count of a configured user.
TEST(UiAuthTest, ThrottleTablesStayBoundedAndKeepRealUsers) {
  LoginThrottle throttle;
  for (int i = 0; i < LoginThrottle::kMaxFailuresPerUser; ++i) {
    throttle.failed("10.1.0." + std::to_string(i), "alice", true);
  }
  for (std::size_t i = 0; i < 3 * LoginThrottle::kMaxEntries; ++i) {
    throttle.failed("10.2." + std::to_string(i / 256) + "." + std::to_string(i % 256),
                    "x" + std::to_string(i), false);
  }
  EXPECT_EQ(throttle.size(), 2 * LoginThrottle::kMaxEntries);
  EXPECT_FALSE(throttle.allowed("10.3.0.1", "alice"));
}

TEST(UiAuthTest, PrettyJsonIndentsLikeJsonbPrettyWithinItsBounds) {
  EXPECT_EQ(
      pretty_json(R"({"a": [1, 2], "b": {}, "c": "x,{"})", 1000, 32).text,
      "{\n    \"a\": [\n        1,\n        2\n    ],\n    \"b\": {},\n    \"c\": \"x,{\"\n}");
  const std::string deep = std::string(10000, '[') + std::string(10000, ']');
  const PrettyJson shown = pretty_json(deep, 48 * 1024, 32);
  EXPECT_TRUE(shown.flattened);
  EXPECT_FALSE(shown.cut);
  EXPECT_LT(shown.text.size(), 24u * 1024) << "32 levels indented, the rest on one line";
  const PrettyJson huge = pretty_json("[\"" + std::string(1 << 20, 'p') + "\"]", 1000, 32);
  EXPECT_TRUE(huge.cut);
  EXPECT_LE(huge.text.size(), 1000u);
}

TEST(UiPagesTest, HostileValuesAreEscapedOnEveryPage) {
  const std::string evil = "<script>alert(1)</script>\"'&";
  PageContext context;
  context.user = evil;
  context.can_act = true;
  context.csrf = "token";
  context.flash = evil;
  JobDetail job = testing::FakeUiStore::make_job(7, evil, "failed");
  job.summary.queue = evil;
  job.summary.last_error = evil;
  job.payload_json = evil;
  job.result_json = evil;
  job.parents.push_back({1, evil, evil, evil});
  job.children.push_back({2, evil, evil, ""});
  job.attempts[0].error = evil;
  job.attempts[0].worker = evil;
  Overview overview;
  QueueOverview queue;
  queue.queue = evil;
  overview.queues.push_back(queue);
  DaemonInfo daemon;
  daemon.id = evil;
  daemon.host = evil;
  overview.daemons.push_back(daemon);
  JobPage page;
  page.jobs.push_back(job.summary);
  JobFilter filter;
  filter.type = evil;
  filter.queue = evil;
  page.next_before = 3;
  ScheduleInfo schedule;
  schedule.name = evil;
  schedule.timing = evil;
  AuditEntry entry;
  entry.user = evil;
  entry.target = evil;
  entry.detail = evil;
  LimitInfo limit;
  limit.name = evil;
  limit.definition = evil;
  QueueInfo info;
  info.queue = evil;
  for (const std::string& html :
       {render_overview(context, overview), render_jobs(context, filter, page, "type=x"),
        render_job(context, job, true), render_queues(context, {info}, {limit}),
        render_schedules(context, {schedule}), render_audit(context, {entry}),
        render_login(true, evil), render_error(&context, 404, evil)}) {
    EXPECT_EQ(html.find("<script>alert"), std::string::npos) << html;
    EXPECT_EQ(html.find("\"'&\""), std::string::npos) << html;
    EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos) << html;
  }
}

TEST(UiPagesTest, ButtonsOnlyWhereTheActionApplies) {
  PageContext context;
  context.can_act = true;
  context.csrf = "t";
  for (const char* status : {"pending", "running", "failed", "done", "dead", "cancelled"}) {
    const std::string html =
        render_job(context, testing::FakeUiStore::make_job(1, "t", status), true);
    const std::string s = status;
    const bool retry = s == "failed" || s == "dead" || s == "cancelled";
    const bool cancel = s == "pending" || s == "failed" || s == "running";
    EXPECT_EQ(html.find("id=\"retry-button\"") != std::string::npos, retry) << status;
    EXPECT_EQ(html.find("id=\"cancel-button\"") != std::string::npos, cancel) << status;
    EXPECT_NE(html.find("<span id=\"job-status\" class=\"status status-" + s + "\">" + s + "<"),
              std::string::npos)
        << html;
    EXPECT_NE(html.find("<tr data-attempt=\"1\">"), std::string::npos) << html;
  }
}

// Blocked jobs: a badge, a filter choice, a column of the overview, and a cancel button
// (pgjobd_cancel ends a blocked job too).
TEST(UiPagesTest, BlockedIsAStatusLikeTheOthers) {
  PageContext context;
  context.can_act = true;
  context.csrf = "t";
  const std::string job =
      render_job(context, testing::FakeUiStore::make_job(1, "t", "blocked"), true);
  EXPECT_NE(job.find(R"(<span id="job-status" class="status status-blocked">blocked<)"),
            std::string::npos)
      << job;
  EXPECT_NE(job.find("id=\"cancel-button\""), std::string::npos) << job;
  EXPECT_EQ(job.find("id=\"retry-button\""), std::string::npos) << job;
  JobFilter filter;
  filter.status = "blocked";
  const std::string list = render_jobs(context, filter, {}, "");
  EXPECT_NE(list.find("<option selected>blocked</option>"), std::string::npos) << list;
  Overview overview;
  QueueOverview queue;
  queue.queue = "mail";
  queue.blocked = {3, false};
  overview.queues.push_back(queue);
  const std::string html = render_overview(context, overview);
  EXPECT_NE(
      html.find(
          R"(<td class="num count-blocked"><a href="/jobs?queue=mail&amp;status=blocked">3</a>)"),
      std::string::npos)
      << html;
}

// The job page: the result, then the parents (with what each ended as) and the children,
// each linked; a note when only the first ones are listed; nothing for a job without them.
TEST(UiPagesTest, JobPageShowsResultParentsAndChildren) {
  PageContext context;
  JobDetail job = testing::FakeUiStore::make_job(5, "t", "done");
  job.result_json = "{\n    \"n\": 1\n}";
  job.parents = {{3, "make", "done", "done"}, {4, "", "", "deleted"}};
  job.parents_total = {2, false};
  job.children = {{9, "use", "blocked", ""}};
  job.children_total = {250, false};
  std::string html = render_job(context, job, true);
  EXPECT_NE(html.find("<pre id=\"job-result\">{\n    &quot;n&quot;: 1\n}</pre>"), std::string::npos)
      << html;
  EXPECT_NE(
      html.find(
          R"(<tr data-job-id="3"><td class="num"><a href="/jobs/3">3</a></td><td class="type">make</td><td class="job-status"><span class="status status-done">done</span></td><td class="parent-status">done</td></tr>)"),
      std::string::npos)
      << html;
  EXPECT_NE(
      html.find(
          R"(<tr data-job-id="4"><td class="num"><a href="/jobs/4">4</a></td><td class="type"></td><td class="job-status">gone</td><td class="parent-status">deleted</td></tr>)"),
      std::string::npos)
      << html;
  EXPECT_NE(html.find(R"(<table id="job-children">)"), std::string::npos) << html;
  EXPECT_NE(html.find("The first 1 of 250."), std::string::npos) << html;
  EXPECT_EQ(html.find("The first 2"), std::string::npos) << html;  // all parents are listed
  // ui.show_payloads: false hides the result as it hides the payload.
  html = render_job(context, job, false);
  EXPECT_EQ(html.find("job-result"), std::string::npos) << html;
  job.parents.clear();
  job.children.clear();
  html = render_job(context, job, true);
  EXPECT_EQ(html.find("job-parents"), std::string::npos) << html;
  EXPECT_EQ(html.find("job-children"), std::string::npos) << html;
}

TEST(UiPagesTest, ChartHasABarPerNonEmptyMinute) {
  std::vector<MinuteBucket> buckets;
  for (int i = 0; i < 60; ++i) buckets.push_back({1764583200 + i * 60, i % 2 == 0 ? 10 : 0, 1});
  const std::string svg = render_throughput_chart(buckets);
  EXPECT_TRUE(svg.starts_with("<svg id=\"throughput-chart\"")) << svg;
  std::size_t done = 0, failed = 0;
  for (std::size_t at = 0; (at = svg.find("class=\"bar-done\"", at)) != std::string::npos; ++at)
    ++done;
  for (std::size_t at = 0; (at = svg.find("class=\"bar-failed\"", at)) != std::string::npos; ++at)
    ++failed;
  EXPECT_EQ(done, 30u);
  EXPECT_EQ(failed, 60u);
  EXPECT_NE(svg.find("10:00 UTC: 10 done, 1 failed"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("style="), std::string::npos) << "the CSP forbids inline styles";
  EXPECT_NO_THROW(render_throughput_chart({}));
}

}  // namespace
}  // namespace pgjobd::ui
