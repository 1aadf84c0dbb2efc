// The http handler's own client: which URLs it takes, and its response parser fed a
// response split at every byte.
#include "handlers/plain_http.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>

namespace pgjobd {
namespace {

const char* no_environment(const char* /*name*/) { return nullptr; }

std::optional<PlainHttpTarget> target(std::string_view url) {
  return plain_http_target(url, &no_environment);
}

TEST(PlainHttpTarget, TakesHttpToAnIpLiteralAsLibcurlWouldSendIt) {
  const auto with_port = target("http://127.0.0.1:8080/job");
  ASSERT_TRUE(with_port.has_value());
  EXPECT_EQ(with_port->host_header, "127.0.0.1:8080");
  EXPECT_EQ(with_port->path, "/job");
  EXPECT_EQ(with_port->port, 8080);
  const auto bare = target("HTTP://10.0.0.1");
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->host_header, "10.0.0.1");
  EXPECT_EQ(bare->path, "/");
  EXPECT_EQ(bare->port, 80);
  EXPECT_EQ(target("http://10.0.0.1:80/x")->host_header, "10.0.0.1");  // the default port
  EXPECT_EQ(target("http://127.0.0.1:8080?q=1")->path, "/?q=1");
  const auto v6 = target("http://[::1]:9000/a?b=1");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host_header, "[::1]:9000");
  EXPECT_EQ(v6->path, "/a?b=1");
}

// Whatever the own client would not send exactly as libcurl does stays with libcurl.
TEST(PlainHttpTarget, LeavesEverythingElseToLibcurl) {
  for (const char* url :
       {"https://127.0.0.1/job", "http://localhost:8080/job", "http://images:8080/thumb",
        "http://user:secret@127.0.0.1/", "http://127.0.0.1/a b", "http://127.0.0.1/a#b",
        "http://127.1/", "http://127.0.0.1:0/", "http://127.0.0.1:65536/", "http://127.0.0.1:/",
        "http://[fe80::1%25eth0]/", "http://127.0.0.1:8x/", "ftp://127.0.0.1/"}) {
    EXPECT_FALSE(target(url).has_value()) << url;
  }
}

// libcurl reads http_proxy, all_proxy and ALL_PROXY for http:// (not HTTP_PROXY): any of
// them set leaves the requests to it, which then goes through the proxy.
TEST(PlainHttpTarget, AProxyFromTheEnvironmentLeavesTheRequestsToLibcurl) {
  static std::string set_name;
  const auto environment = [](const char* name) -> const char* {
    return set_name == name ? "http://proxy:3128" : nullptr;
  };
  for (const char* name : {"http_proxy", "all_proxy", "ALL_PROXY"}) {
    set_name = name;
    EXPECT_FALSE(plain_http_target("http://127.0.0.1/", environment).has_value()) << name;
  }
  set_name = "HTTP_PROXY";
  EXPECT_TRUE(plain_http_target("http://127.0.0.1/", environment).has_value());
  const auto empty = [](const char* name) -> const char* {
    return std::strcmp(name, "http_proxy") == 0 ? "" : nullptr;
  };
  EXPECT_TRUE(plain_http_target("http://127.0.0.1/", empty).has_value());
}

struct Parsed {
  PlainHttpResponse::Progress progress = PlainHttpResponse::Progress::kMore;
  PlainHttpResponse response;
  std::string body;
  std::size_t total = 0;
  std::size_t left = 0;  // bytes after the response
};

// Feeds `text` in two reads split at `split`, then the end of the stream when `close`.
Parsed parse(std::string_view text, std::size_t split, bool close = false) {
  Parsed parsed;
  HeadBuffer body(1 << 20);
  std::size_t left = 0;
  for (const std::string_view part : {text.substr(0, split), text.substr(split)}) {
    if (part.empty() || parsed.progress != PlainHttpResponse::Progress::kMore) {
      left += parsed.progress == PlainHttpResponse::Progress::kDone ? part.size() : 0;
      continue;
    }
    std::size_t used = 0;
    parsed.progress = parsed.response.feed(part, body, used);
    if (parsed.progress == PlainHttpResponse::Progress::kDone) left += part.size() - used;
  }
  if (close && parsed.progress == PlainHttpResponse::Progress::kMore) {
    parsed.progress = parsed.response.end_of_stream();
  }
  parsed.body = body.bytes();
  parsed.total = body.total();
  parsed.left = left;
  return parsed;
}

constexpr auto kDone = PlainHttpResponse::Progress::kDone;
constexpr auto kMore = PlainHttpResponse::Progress::kMore;
constexpr auto kError = PlainHttpResponse::Progress::kError;

TEST(PlainHttpResponse, AResponseSplitAtAnyByteParsesTheSame) {
  const std::string text =
      "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nRetry-After: 7\r\n"
      "Content-Length: 11\r\n\r\n{\"a\":\"bcd\"}";
  for (std::size_t split = 0; split <= text.size(); ++split) {
    const Parsed parsed = parse(text, split);
    ASSERT_EQ(parsed.progress, kDone) << split;
    EXPECT_EQ(parsed.response.status(), 503);
    EXPECT_EQ(parsed.body, "{\"a\":\"bcd\"}");
    EXPECT_TRUE(parsed.response.keep_alive());
    EXPECT_EQ(parsed.response.content_type(), "application/json");
    EXPECT_EQ(parsed.response.retry_after(), Millis(7000));
    EXPECT_EQ(parsed.left, 0U);
  }
}

TEST(PlainHttpResponse, AChunkedBodySplitAtAnyByteIsJoined) {
  const std::string text =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;ext=1\r\nhello\r\n"
      "6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n";
  for (std::size_t split = 0; split <= text.size(); ++split) {
    const Parsed parsed = parse(text, split);
    ASSERT_EQ(parsed.progress, kDone) << split;
    EXPECT_EQ(parsed.body, "hello world");
    EXPECT_TRUE(parsed.response.keep_alive());
  }
  EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0).progress,
            kError);
}

TEST(PlainHttpResponse, ABodyWithoutALengthEndsWithTheConnection) {
  const std::string text = "HTTP/1.1 200 OK\r\n\r\nto the end";
  const Parsed open = parse(text, 5);
  EXPECT_EQ(open.progress, kMore);
  const Parsed closed = parse(text, 5, true);
  ASSERT_EQ(closed.progress, kDone);
  EXPECT_EQ(closed.body, "to the end");
  EXPECT_FALSE(closed.response.keep_alive());
}

TEST(PlainHttpResponse, KeepAliveAsEachVersionAndConnectionHeaderSay) {
  EXPECT_FALSE(parse("HTTP/1.1 204 No\r\nConnection: close\r\n\r\n", 0).response.keep_alive());
  EXPECT_FALSE(parse("HTTP/1.0 204 No\r\n\r\n", 0).response.keep_alive());
  EXPECT_TRUE(parse("HTTP/1.0 204 No\r\nConnection: Keep-Alive\r\n\r\n", 0).response.keep_alive());
  // Bare LF line ends, as libcurl takes them; 204 has no body whatever its length says.
  const Parsed bare = parse("HTTP/1.1 204 No\nContent-Length: 5\n\n", 0);
  EXPECT_EQ(bare.progress, kDone);
  EXPECT_TRUE(bare.response.keep_alive());
}

TEST(PlainHttpResponse, InterimResponsesAreSkippedAndBytesAfterTheResponseLeft) {
  const std::string text =
      "HTTP/1.1 100 Continue\r\nRetry-After: 9\r\n\r\nHTTP/1.1 429 Slow\r\nContent-Length: "
      "2\r\n\r\n"
      "okHTTP/1.1";
  const Parsed parsed = parse(text, text.size());
  ASSERT_EQ(parsed.progress, kDone);
  EXPECT_EQ(parsed.response.status(), 429);
  EXPECT_EQ(parsed.body, "ok");
  EXPECT_FALSE(parsed.response.retry_after().has_value());  // the 100's is not the 429's
  EXPECT_EQ(parsed.left, std::strlen("HTTP/1.1"));
}

TEST(PlainHttpResponse, AHeaderLineOverTheBoundFails) {
  const std::string text = "HTTP/1.1 200 OK\r\nX-Big: " + std::string(kMaxHeaderLine, 'a');
  const Parsed parsed = parse(text, text.size() / 2);
  ASSERT_EQ(parsed.progress, kError);
  EXPECT_TRUE(parsed.response.header_too_large());
  EXPECT_EQ(parsed.response.error().rfind("response header larger than 102400 bytes", 0), 0U);
  // Just under the bound is a header like any other.
  const std::string under = "HTTP/1.1 200 OK\r\nX-Big: " + std::string(kMaxHeaderLine - 9, 'a') +
                            "\r\nContent-Length: 0\r\n\r\n";
  EXPECT_EQ(parse(under, 20).progress, kDone);
}

TEST(PlainHttpResponse, AConnectionClosedEarlyOrAGarbledReplyFails) {
  EXPECT_EQ(parse("", 0, true).response.error(), "Empty reply from server");
  const Parsed cut = parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 3, true);
  EXPECT_EQ(cut.progress, kError);
  EXPECT_TRUE(cut.response.started());
  EXPECT_EQ(parse("SSH-2.0-OpenSSH\r\n", 4).progress, kError);
  EXPECT_EQ(parse("HTTP/2 200\r\n\r\n", 4).progress, kError);
  EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 0).progress, kError);
  EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 0).progress,
            kError);
}

TEST(PlainHttpResponse, ResetForgetsTheLastResponse) {
  PlainHttpResponse response;
  HeadBuffer body(100);
  std::size_t used = 0;
  ASSERT_EQ(response.feed("HTTP/1.1 503 X\r\nRetry-After: 5\r\nContent-Type: text/plain\r\n"
                          "Content-Length: 0\r\n\r\n",
                          body, used),
            kDone);
  response.reset();
  EXPECT_FALSE(response.started());
  ASSERT_EQ(response.feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", body, used), kDone);
  EXPECT_FALSE(response.retry_after().has_value());
  EXPECT_FALSE(response.has_content_type());
}

}  // namespace
}  // namespace pgjobd
