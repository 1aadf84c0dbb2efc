#pragma once
// The http handler's own HTTP/1.1 client for plain http:// to an IP literal: where a
// request goes, and an incremental parser of the response. libcurl's per-request work (a
// connection struct and URL parse, header building and matching, two polls) cost more CPU
// than a whole request of wrk's (bench/README.md, "Real handlers"); the handler uses this
// instead when nothing libcurl alone does applies (plain_http_target).

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pgjobd/config.hpp"
#include "text/ascii.hpp"
#include "text/head_buffer.hpp"

namespace pgjobd {

// libcurl's bound on one response header line (CURL_MAX_HTTP_HEADER), kept so that both
// clients fail the same responses.
inline constexpr std::size_t kMaxHeaderLine = 100 * 1024;

// `text` without the white space around it.
std::string_view trim_http_space(std::string_view text);

struct PlainHttpTarget {
  sockaddr_storage address{};
  socklen_t address_length = 0;
  std::string host_header;  // "127.0.0.1:8080", "[::1]", as libcurl sends it
  std::string path;         // path and query, "/" when the URL has none
  std::string host;         // the literal, for error texts
  int port = 80;
};

// Where `url` goes when the own client can carry it exactly as libcurl would: http://, an
// IPv4 or IPv6 literal (a name would need a resolver, which must never stall the transfer
// thread), no user info, fragment, or byte libcurl would encode or reject, and no proxy from
// the environment (libcurl reads http_proxy, all_proxy and ALL_PROXY for http://; any of them
// set leaves every request to libcurl). `environment` stands for getenv.
std::optional<PlainHttpTarget> plain_http_target(std::string_view url,
                                                 const char* (*environment)(const char*) = nullptr);

// One response read off a connection, fed as its bytes arrive however they are split:
// the status line, headers (1xx responses skipped), a body delimited by Content-Length,
// chunked encoding or the end of the connection. The body goes to a HeadBuffer (its
// bound); the rest is kept for the result.
class PlainHttpResponse {
 public:
  enum class Progress { kMore, kDone, kError };

  // Starts over for the next response (buffers kept).
  void reset();

  // Takes bytes from `data`; `used` says how many (on kDone, bytes past the response are
  // left: the connection is then not reused).
  Progress feed(std::string_view data, HeadBuffer& body, std::size_t& used);
  // The peer closed the connection: kDone for a body that ends with it, else kError.
  Progress end_of_stream();

  bool started() const { return started_; }  // any byte of a response came
  long status() const { return status_; }
  bool keep_alive() const { return keep_alive_; }
  const std::string& content_type() const { return content_type_; }
  bool has_content_type() const { return has_content_type_; }
  std::optional<Millis> retry_after() const { return retry_after_; }
  const std::string& error() const { return error_; }
  bool header_too_large() const { return header_too_large_; }
  std::uint64_t body_bytes() const { return body_seen_; }

 private:
  enum class State {
    kStatusLine,
    kHeaders,
    kBody,
    kBodyUntilClose,
    kChunkSize,
    kChunkData,
    kChunkEnd,
    kTrailers,
    kDone,
  };

  Progress fail(std::string text);
  // One complete line (without its line ending).
  Progress on_line(std::string_view line);
  Progress on_header(std::string_view line);
  Progress end_of_headers();

  State state_ = State::kStatusLine;
  std::string line_;  // a line split across reads
  bool started_ = false;
  long status_ = 0;
  bool http10_ = false;
  bool keep_alive_ = true;
  bool close_ = false;
  bool chunked_ = false;
  bool other_coding_ = false;  // a Transfer-Encoding other than chunked last
  std::optional<std::uint64_t> content_length_;
  std::uint64_t remaining_ = 0;  // of the body or the current chunk
  std::uint64_t body_seen_ = 0;
  bool has_content_type_ = false;
  std::string content_type_;
  std::optional<Millis> retry_after_;
  std::string error_;
  bool header_too_large_ = false;
};

}  // namespace pgjobd
