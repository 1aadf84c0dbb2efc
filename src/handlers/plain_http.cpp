// The own HTTP/1.1 client's target and response parser (plain_http.hpp).
#include "handlers/plain_http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "handlers/http_handler.hpp"

namespace pgjobd {

std::string_view trim_http_space(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

namespace {

const char* real_environment(const char* name) { return std::getenv(name); }

}  // namespace

std::optional<PlainHttpTarget> plain_http_target(std::string_view url,
                                                 const char* (*environment)(const char*)) {
  if (environment == nullptr) environment = &real_environment;
  for (const char* name : {"http_proxy", "all_proxy", "ALL_PROXY"}) {
    const char* value = environment(name);
    if (value != nullptr && value[0] != '\0') return std::nullopt;
  }
  constexpr std::string_view kScheme = "http://";
  if (url.size() < kScheme.size() ||
      !equals_ignoring_case(url.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  url.remove_prefix(kScheme.size());
  // Only plain printable bytes: libcurl encodes or rejects the others, and '#' and '@' (a
  // fragment, user info) change what it sends.
  if (!std::all_of(url.begin(), url.end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte > 0x20 && byte < 0x7F && c != '#' && c != '@' && c != '\\';
      })) {
    return std::nullopt;
  }
  const std::size_t slash = std::min(url.find('/'), url.find('?'));
  const std::string_view authority = url.substr(0, slash);
  std::string_view rest = slash == std::string_view::npos ? std::string_view() : url.substr(slash);
  PlainHttpTarget target;
  std::string_view host;
  std::string_view port;
  if (authority.starts_with('[')) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) return std::nullopt;
    if (!after.empty()) port = after.substr(1);
    const std::string literal(host);
    auto* address = reinterpret_cast<sockaddr_in6*>(&target.address);
    if (inet_pton(AF_INET6, literal.c_str(), &address->sin6_addr) != 1) return std::nullopt;
    address->sin6_family = AF_INET6;
    target.address_length = sizeof(sockaddr_in6);
  } else {
    const std::size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
    // inet_pton takes only the dotted quad; "127.1" and the like are left to libcurl.
    const std::string literal(host);
    auto* address = reinterpret_cast<sockaddr_in*>(&target.address);
    if (inet_pton(AF_INET, literal.c_str(), &address->sin_addr) != 1) return std::nullopt;
    address->sin_family = AF_INET;
    target.address_length = sizeof(sockaddr_in);
  }
  if (!port.empty()) {
    const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), target.port);
    if (error != std::errc() || end != port.data() + port.size() || target.port < 1 ||
        target.port > 65535) {
      return std::nullopt;
    }
  } else if (authority.ends_with(':')) {
    return std::nullopt;
  }
  const auto network_port = htons(static_cast<std::uint16_t>(target.port));
  if (target.address.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&target.address)->sin6_port = network_port;
  } else {
    reinterpret_cast<sockaddr_in*>(&target.address)->sin_port = network_port;
  }
  target.host = std::string(host);
  // libcurl names the port only when it is not the scheme's.
  target.host_header = target.address.ss_family == AF_INET6 ? "[" + target.host + "]" : target.host;
  if (target.port != 80) target.host_header += ":" + std::to_string(target.port);
  target.path = rest.starts_with('/') ? std::string(rest) : "/" + std::string(rest);
  return target;
}

void PlainHttpResponse::reset() {
  state_ = State::kStatusLine;
  line_.clear();
  started_ = false;
  status_ = 0;
  http10_ = false;
  keep_alive_ = true;
  close_ = false;
  chunked_ = false;
  other_coding_ = false;
  content_length_.reset();
  remaining_ = 0;
  body_seen_ = 0;
  has_content_type_ = false;
  content_type_.clear();
  retry_after_.reset();
  error_.clear();
  header_too_large_ = false;
}

PlainHttpResponse::Progress PlainHttpResponse::fail(std::string text) {
  error_ = std::move(text);
  keep_alive_ = false;
  return Progress::kError;
}

PlainHttpResponse::Progress PlainHttpResponse::feed(std::string_view data, HeadBuffer& body,
                                                    std::size_t& used) {
  const std::size_t size = data.size();
  if (size > 0) started_ = true;
  while (!data.empty() && state_ != State::kDone) {
    if (state_ == State::kBody || state_ == State::kChunkData || state_ == State::kBodyUntilClose) {
      std::size_t take = data.size();
      if (state_ != State::kBodyUntilClose)
        take = static_cast<std::size_t>(std::min<std::uint64_t>(take, remaining_));
      body.append(data.substr(0, take));
      body_seen_ += take;
      data.remove_prefix(take);
      if (state_ == State::kBodyUntilClose) continue;
      remaining_ -= take;
      if (remaining_ == 0) state_ = state_ == State::kBody ? State::kDone : State::kChunkEnd;
      continue;
    }
    // A line: whole in `data` (the usual case, no copy), or completed from line_.
    const std::size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      if (line_.size() + data.size() > kMaxHeaderLine) {
        header_too_large_ = true;
        return fail("response header larger than " + std::to_string(kMaxHeaderLine) +
                    " bytes (the bound on one header line)");
      }
      line_.append(data);
      data = {};
      break;
    }
    std::string_view line = data.substr(0, newline);
    data.remove_prefix(newline + 1);
    if (!line_.empty()) {
      line_.append(line);
      line = line_;
    }
    if (line.size() > kMaxHeaderLine) {
      header_too_large_ = true;
      return fail("response header larger than " + std::to_string(kMaxHeaderLine) +
                  " bytes (the bound on one header line)");
    }
    if (line.ends_with('\r')) line.remove_suffix(1);
    const Progress progress = on_line(line);
    line_.clear();
    if (progress == Progress::kError) return progress;
  }
  used = size - data.size();
  return state_ == State::kDone ? Progress::kDone : Progress::kMore;
}

PlainHttpResponse::Progress PlainHttpResponse::end_of_stream() {
  if (state_ == State::kBodyUntilClose || state_ == State::kDone) {
    state_ = State::kDone;
    keep_alive_ = false;
    return Progress::kDone;
  }
  if (!started_) return fail("Empty reply from server");
  return fail("the connection closed before the end of the response");
}

PlainHttpResponse::Progress PlainHttpResponse::on_line(std::string_view line) {
  switch (state_) {
    case State::kStatusLine: {
      // "HTTP/1.1 200 OK": HTTP/1.x only, as libcurl 7.88 asks for on http://.
      if (line.size() < 12 || !line.starts_with("HTTP/1.") || line[8] != ' ' ||
          (line[7] != '0' && line[7] != '1') || (line.size() > 12 && line[12] != ' ')) {
        return fail("Unsupported HTTP response: the status line is not HTTP/1.0 or 1.1");
      }
      const std::string_view digits = line.substr(9, 3);
      const auto [end, error] = std::from_chars(digits.data(), digits.data() + 3, status_);
      if (error != std::errc() || end != digits.data() + 3 || status_ < 100) {
        return fail("Unsupported HTTP response: no status code");
      }
      http10_ = line[7] == '0';
      keep_alive_ = !http10_;
      close_ = false;
      chunked_ = false;
      other_coding_ = false;
      content_length_.reset();
      has_content_type_ = false;
      content_type_.clear();
      retry_after_.reset();  // a new response (e.g. after 100 Continue) starts
      state_ = State::kHeaders;
      return Progress::kMore;
    }
    case State::kHeaders:
      if (line.empty()) return end_of_headers();
      return on_header(line);
    case State::kChunkSize: {
      std::string_view size = trim_http_space(line.substr(0, line.find(';')));
      std::uint64_t bytes = 0;
      const auto [end, error] = std::from_chars(size.data(), size.data() + size.size(), bytes, 16);
      if (size.empty() || error != std::errc() || end != size.data() + size.size()) {
        return fail("Malformed chunked encoding: a bad chunk size");
      }
      remaining_ = bytes;
      state_ = bytes == 0 ? State::kTrailers : State::kChunkData;
      return Progress::kMore;
    }
    case State::kChunkEnd:
      if (!line.empty()) return fail("Malformed chunked encoding: no line end after a chunk");
      state_ = State::kChunkSize;
      return Progress::kMore;
    case State::kTrailers:
      if (line.empty()) state_ = State::kDone;
      return Progress::kMore;
    default:
      return Progress::kMore;
  }
}

PlainHttpResponse::Progress PlainHttpResponse::on_header(std::string_view line) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Progress::kMore;  // as libcurl: ignored
  const std::string_view name = trim_http_space(line.substr(0, colon));
  const std::string_view value = trim_http_space(line.substr(colon + 1));
  if (equals_ignoring_case(name, "content-length")) {
    std::uint64_t length = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (value.empty() || error != std::errc() || end != value.data() + value.size() ||
        (content_length_ && *content_length_ != length)) {
      return fail("Invalid Content-Length: " + std::string(value));
    }
    content_length_ = length;
  } else if (equals_ignoring_case(name, "transfer-encoding")) {
    // The last coding decides whether the message is chunked (RFC 9112 §6.3).
    std::string_view last =
        value.substr(value.rfind(',') == std::string_view::npos ? 0 : value.rfind(',') + 1);
    chunked_ = equals_ignoring_case(trim_http_space(last), "chunked");
    other_coding_ = !chunked_;  // the body then ends with the connection
  } else if (equals_ignoring_case(name, "connection")) {
    if (equals_ignoring_case(value, "close")) close_ = true;
    if (equals_ignoring_case(value, "keep-alive")) keep_alive_ = true;
  } else if (equals_ignoring_case(name, "content-type")) {
    has_content_type_ = true;
    content_type_.assign(value);
  } else if (equals_ignoring_case(name, "retry-after")) {
    retry_after_ = parse_retry_after(value);
  }
  return Progress::kMore;
}

PlainHttpResponse::Progress PlainHttpResponse::end_of_headers() {
  if (status_ < 200) {
    if (status_ == 101) return fail("Unsupported HTTP response: 101 Switching Protocols");
    state_ = State::kStatusLine;  // 100 Continue and other interim responses: the next one
    return Progress::kMore;
  }
  if (close_) keep_alive_ = false;
  if (status_ == 204 || status_ == 304) {
    state_ = State::kDone;
  } else if (chunked_) {
    state_ = State::kChunkSize;
  } else if (content_length_ && !other_coding_) {
    remaining_ = *content_length_;
    state_ = remaining_ == 0 ? State::kDone : State::kBody;
  } else {
    keep_alive_ = false;
    state_ = State::kBodyUntilClose;
  }
  return Progress::kMore;
}

}  // namespace pgjobd
