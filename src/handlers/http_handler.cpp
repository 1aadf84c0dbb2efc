// The http handler: POSTs a job's payload with libcurl and maps the response to a JobResult.
#include "handlers/http_handler.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <ctime>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "handlers/curl_library.hpp"
#include "pgjobd/version.hpp"
#include "text/head_buffer.hpp"

namespace pgjobd {
namespace {

constexpr std::size_t kMaxBodyKept = 4096;  // of the response, for last_error
// HandlerConfig documents timeout 0 as "no timeout", but an HTTP peer that never answers
// would then hold a worker forever; 0 therefore means this default for the http handler.
constexpr Millis kDefaultTimeout{30000};

// Only made once the library is loaded (handles and lists come from it).
struct CurlDeleter {
  void operator()(CURL* handle) const { curl_library().easy_cleanup(handle); }
  void operator()(curl_slist* list) const { curl_library().slist_free_all(list); }
};

using EasyHandle = std::unique_ptr<CURL, CurlDeleter>;

// The easy handles of one http handler, kept between jobs. A handle keeps its connections
// open (HTTP/1.1 keep-alive), its DNS cache and its TLS session IDs, so a stream of jobs
// to one service pays the TCP and TLS handshakes once per busy worker instead of once per
// job (a new handle per job also left a TIME_WAIT socket per job behind). libcurl forbids
// one handle in two transfers at once, so each job takes a handle of its own; the most
// recently returned goes out first, which keeps the fewest connections warm. A connection
// the peer closed while idle is noticed by libcurl, which opens a new one (and resends a
// request that a reused connection lost before any answer came).
class EasyHandles {
 public:
  // A handle for one transfer, back to the pool when it goes out of scope.
  class Lease {
   public:
    Lease(std::shared_ptr<EasyHandles> pool, EasyHandle handle)
        : pool_(std::move(pool)), handle_(std::move(handle)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_->give_back(std::move(handle_)); }
    CURL* get() const { return handle_.get(); }

   private:
    std::shared_ptr<EasyHandles> pool_;
    EasyHandle handle_;
  };

  static Lease take(const std::shared_ptr<EasyHandles>& pool) {
    {
      std::lock_guard lock(pool->mutex_);
      if (!pool->idle_.empty()) {
        EasyHandle handle = std::move(pool->idle_.back());
        pool->idle_.pop_back();
        return Lease(pool, std::move(handle));
      }
    }
    EasyHandle handle(curl_library().easy_init());
    if (!handle) throw std::runtime_error("curl_easy_init failed");
    return Lease(pool, std::move(handle));
  }

 private:
  // curl_easy_reset sets every option back to its default, so no header, payload or
  // callback pointer of one job survives into the next; connections and caches stay.
  void give_back(EasyHandle handle) noexcept {
    curl_library().easy_reset(handle.get());
    try {
      std::lock_guard lock(mutex_);
      idle_.push_back(std::move(handle));
    } catch (...) {
      // Called from a destructor, so nothing may escape. Out of memory: the handle is
      // freed here, and a later job makes a new one.
    }
  }

  std::mutex mutex_;
  std::vector<EasyHandle> idle_;  // at most as many as jobs ran at once
};

// What the callbacks collect during one transfer.
struct Transfer {
  explicit Transfer(std::size_t body_bytes) : body(body_bytes) {}
  // The first bytes of the body: kMaxBodyKept for last_error, and max_result_bytes + 1 for
  // the result of a 2xx (the one over tells the job runner it was longer).
  HeadBuffer body;
  std::optional<Millis> retry_after;
  std::stop_token stop;
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

// Retry-After is delay-seconds or an HTTP-date (RFC 9110 §10.2.3); a date in the past is 0.
// Saturates at kMaxRetryAfter: a number too long for any integer, or a date centuries
// ahead, is a long wait, not an overflow (the job runner then caps it at retry.max_delay).
std::optional<Millis> parse_retry_after(std::string_view value) {
  constexpr long long kMaxSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(kMaxRetryAfter).count();
  value = trim(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
    long long seconds = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (error == std::errc::result_out_of_range || seconds > kMaxSeconds) return kMaxRetryAfter;
    if (error != std::errc() || end != value.data() + value.size()) return std::nullopt;
    return Millis(seconds * 1000);
  }
  if (!std::isalpha(static_cast<unsigned char>(value.front()))) {
    return std::nullopt;  // "-5", "1.5": neither delay-seconds nor an HTTP-date
  }
  const std::string date(value);
  const std::time_t when = curl_library().getdate(date.c_str(), nullptr);
  if (when == -1) return std::nullopt;
  const std::time_t now = std::time(nullptr);
  if (when <= now) return Millis(0);
  // Compared before multiplying: when − now may be close to the largest time_t.
  if (when - now > kMaxSeconds) return kMaxRetryAfter;
  return Millis(static_cast<long long>(when - now) * 1000);
}

namespace {

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    transfer->retry_after.reset();  // a new response (e.g. after 100 Continue) starts
  } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    constexpr std::string_view kName = "retry-after";
    const std::string_view name = trim(line.substr(0, colon));
    bool match = name.size() == kName.size();
    for (std::size_t i = 0; match && i < name.size(); ++i) {
      match = std::tolower(static_cast<unsigned char>(name[i])) == kName[i];
    }
    if (match) transfer->retry_after = parse_retry_after(line.substr(colon + 1));
  }
  return size * count;
}

// Keeps the body's first bytes and drains the rest, so the response completes normally.
std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  const std::size_t bytes = size * count;
  static_cast<Transfer*>(user)->body.append({data, bytes});
  return bytes;
}

// libcurl calls this frequently while data moves and about once a second while idle, so a
// stop request aborts the transfer within roughly a second.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<Transfer*>(user)->stop.stop_requested() ? 1 : 0;
}

bool is_retryable_status(long status) { return status == 408 || status == 429 || status >= 500; }

// Done with the body as the result: JSON when the response says it is (its media type
// application/json or any +json) and it parses, else a JSON string of the text.
JobResult done_with_body(Transfer& transfer, const char* content_type) {
  JobResult done = JobResult::done(transfer.body.take());
  done.result_bytes = transfer.body.total();
  if (content_type == nullptr || !is_json_media_type(content_type)) {
    done.result_format = ResultFormat::kText;
  }
  return done;
}

}  // namespace

std::string header_value(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F || c == '%') {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0x0F];
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

JobResult post(const std::shared_ptr<EasyHandles>& handles, const std::string& url, Millis timeout,
               std::size_t max_result_bytes, const Job& job, std::stop_token stop) {
  if (stop.stop_requested()) return JobResult::released();
  const CurlLibrary& curl = curl_library();
  const EasyHandles::Lease lease = EasyHandles::take(handles);

  std::unique_ptr<curl_slist, CurlDeleter> headers;
  auto add_header = [&curl, &headers](const std::string& header) {
    // curl_slist_append returns the list's head (new on the first call) or null on failure.
    curl_slist* head = curl.slist_append(headers.get(), header.c_str());
    if (head == nullptr) throw std::bad_alloc();
    if (headers == nullptr) headers.reset(head);
  };
  add_header("Content-Type: application/json");
  add_header("X-Pgjobd-Job-Id: " + std::to_string(job.id));
  add_header("X-Pgjobd-Job-Type: " + header_value(job.type));
  add_header("X-Pgjobd-Job-Queue: " + header_value(job.queue));
  add_header("X-Pgjobd-Job-Attempt: " + std::to_string(job.attempt));
  // Without this, curl sends "Expect: 100-continue" for large bodies and waits up to a
  // second for a 100 that many servers never send.
  add_header("Expect:");

  Transfer transfer(std::max(kMaxBodyKept, max_result_bytes == 0 ? 0 : max_result_bytes + 1));
  transfer.stop = std::move(stop);
  char error_text[CURL_ERROR_SIZE] = {};
  const std::string user_agent = std::string("pgjobd/") + kVersion;
  CURL* handle = lease.get();
  curl.easy_setopt(handle, CURLOPT_URL, url.c_str());
  // The payload must never go to file://, ldap:// or the like. Redirects are not followed.
  curl.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
  curl.easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
  curl.easy_setopt(handle, CURLOPT_POST, 1L);
  curl.easy_setopt(handle, CURLOPT_POSTFIELDS, job.payload.data());
  curl.easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                   static_cast<curl_off_t>(job.payload.size()));
  curl.easy_setopt(handle, CURLOPT_USERAGENT, user_agent.c_str());
  curl.easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // signals are process-wide; we are threaded
  curl.easy_setopt(handle, CURLOPT_ERRORBUFFER, error_text);
  curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, &on_header);
  curl.easy_setopt(handle, CURLOPT_HEADERDATA, &transfer);
  curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, &on_body);
  curl.easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
  curl.easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
  curl.easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, &on_progress);
  curl.easy_setopt(handle, CURLOPT_XFERINFODATA, &transfer);

  const CURLcode code = curl.easy_perform(handle);
  if (code == CURLE_ABORTED_BY_CALLBACK || transfer.stop.stop_requested()) {
    return JobResult::released();
  }
  if (code != CURLE_OK) {
    std::string text = error_text[0] != '\0' ? error_text : curl.easy_strerror(code);
    if (code == CURLE_OPERATION_TIMEDOUT) {
      text = "timeout after " + std::to_string(timeout.count()) + "ms: " + text;
    }
    return JobResult::retry(std::move(text));  // connection errors and timeouts are transient
  }

  long status = 0;
  curl.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300) {
    char* content_type = nullptr;  // libcurl's, valid until the handle's next transfer
    curl.easy_getinfo(handle, CURLINFO_CONTENT_TYPE, &content_type);
    return done_with_body(transfer, content_type);
  }
  std::string error = "HTTP " + std::to_string(status);
  const std::string_view body = transfer.body.bytes();
  if (!body.empty()) error.append(": ").append(body.substr(0, kMaxBodyKept));
  if (is_retryable_status(status)) return JobResult::retry(std::move(error), transfer.retry_after);
  return JobResult::dead(std::move(error));
}

}  // namespace

bool is_json_media_type(std::string_view content_type) {
  std::string_view type = trim(content_type.substr(0, content_type.find(';')));
  const auto ends_with = [&type](std::string_view suffix) {
    if (type.size() < suffix.size()) return false;
    const std::string_view tail = type.substr(type.size() - suffix.size());
    return std::equal(tail.begin(), tail.end(), suffix.begin(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == b;
    });
  };
  return (type.size() == 16 && ends_with("application/json")) ||
         (ends_with("+json") && type.find('/') != std::string_view::npos);
}

Handler make_http_handler(const HandlerConfig& config, std::size_t max_result_bytes) {
  curl_library();  // a library that cannot be loaded stops the start, not every job
  const Millis timeout = config.timeout.count() > 0 ? config.timeout : kDefaultTimeout;
  return [handles = std::make_shared<EasyHandles>(), url = config.http_url, timeout,
          max_result_bytes](const Job& job, std::stop_token stop) {
    return post(handles, url, timeout, max_result_bytes, job, std::move(stop));
  };
}

}  // namespace pgjobd
