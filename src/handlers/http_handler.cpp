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
// would then hold a job's slot forever; 0 therefore means this default for the http handler.
constexpr Millis kDefaultTimeout{30000};
// The longest the transfer thread sleeps without a socket event or a wake-up; libcurl's own
// timers (timeouts, connection upkeep) shorten it.
constexpr int kPollMillis = 1000;

// Only made once the library is loaded (handles and lists come from it).
struct CurlDeleter {
  void operator()(CURL* handle) const { curl_library().easy_cleanup(handle); }
  void operator()(curl_slist* list) const { curl_library().slist_free_all(list); }
};

using EasyHandle = std::unique_ptr<CURL, CurlDeleter>;
// CURLM and CURL are both void: a deleter of its own.
struct MultiDeleter {
  void operator()(CURLM* multi) const { curl_library().multi_cleanup(multi); }
};
using MultiHandle = std::unique_ptr<CURLM, MultiDeleter>;
using HeaderList = std::unique_ptr<curl_slist, CurlDeleter>;

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

// One job's request, from its start to its result: what the transfer thread sets up and what
// libcurl's callbacks collect.
struct Transfer {
  Transfer(const Job& job_in, std::stop_token stop_in, HandlerDone done_in, std::size_t body_bytes)
      : job(job_in), stop(std::move(stop_in)), done(std::move(done_in)), body(body_bytes) {}
  const Job& job;  // outlives the call of done (AsyncHandler::Start)
  std::stop_token stop;
  HandlerDone done;
  HeaderList headers;
  EasyHandle handle;  // while in the multi handle
  // The first bytes of the body: kMaxBodyKept for last_error, and max_result_bytes + 1 for
  // the result of a 2xx (the one over tells the job runner it was longer).
  HeadBuffer body;
  std::optional<Millis> retry_after;
  bool header_ended = false;  // the blank line after the response's headers came
  char error_text[CURL_ERROR_SIZE] = {};
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    transfer->retry_after.reset();  // a new response (e.g. after 100 Continue) starts
    transfer->header_ended = false;
  } else if (trim(line).empty()) {
    transfer->header_ended = true;
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

// What a finished transfer means for its job.
JobResult result_of(Transfer& transfer, CURLcode code, Millis timeout) {
  const CurlLibrary& curl = curl_library();
  if (code != CURLE_OK) {
    std::string text =
        transfer.error_text[0] != '\0' ? transfer.error_text : curl.easy_strerror(code);
    if (code == CURLE_OPERATION_TIMEDOUT) {
      text = "timeout after " + std::to_string(timeout.count()) + "ms: " + text;
    } else if (code == CURLE_OUT_OF_MEMORY && !transfer.header_ended) {
      // libcurl's answer to a header line over its bound, which alone read "Out of memory".
      text = "response header larger than " + std::to_string(CURL_MAX_HTTP_HEADER) +
             " bytes (libcurl's bound on one header line): " + text;
    }
    return JobResult::retry(std::move(text));  // connection errors and timeouts are transient
  }
  long status = 0;
  curl.easy_getinfo(transfer.handle.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300) {
    char* content_type = nullptr;  // libcurl's, valid until the handle's next transfer
    curl.easy_getinfo(transfer.handle.get(), CURLINFO_CONTENT_TYPE, &content_type);
    return done_with_body(transfer, content_type);
  }
  std::string error = "HTTP " + std::to_string(status);
  const std::string_view body = transfer.body.bytes();
  if (!body.empty()) error.append(": ").append(body.substr(0, kMaxBodyKept));
  if (is_retryable_status(status)) return JobResult::retry(std::move(error), transfer.retry_after);
  return JobResult::dead(std::move(error));
}

// One http handler's requests, all driven by one thread through a libcurl multi handle: a
// job's worker hands its request over and is free for the next job, and the thread sleeps in
// one poll for every request in flight (with a thread per request, each slept and was woken
// on its own: half the daemon's samples were thread switches; bench/README.md). The multi
// handle keeps one connection cache for all of them (HTTP/1.1 keep-alive, DNS, TLS
// sessions), at most `max_connections` open (worker.concurrency: no more requests are ever
// in flight at once).
class TransferThread {
 public:
  TransferThread(std::string url, Millis timeout, std::size_t body_bytes, long max_connections)
      : state_(std::make_shared<State>(std::move(url), timeout, body_bytes, max_connections)),
        thread_([state = state_] { state->run(); }) {}
  TransferThread(const TransferThread&) = delete;
  TransferThread& operator=(const TransferThread&) = delete;

  // Its requests still in flight finish first (a reload's old handler ends with its jobs).
  ~TransferThread() {
    state_->close();
    // The last reference may go with a job's completion, on the thread itself: it then ends
    // on its own once nothing is in flight, owning its state.
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }

  // Never calls `done` itself (a job stopped already ends on the transfer thread, at once):
  // the worker pool may call this from a job's completion, which must not recurse.
  void start(const Job& job, std::stop_token stop, HandlerDone done) {
    state_->add(
        std::make_unique<Transfer>(job, std::move(stop), std::move(done), state_->body_bytes));
  }

 private:
  struct State {
    State(std::string url_in, Millis timeout_in, std::size_t body_bytes_in, long max_connections)
        : url(std::move(url_in)),
          timeout(timeout_in),
          body_bytes(body_bytes_in),
          multi(curl_library().multi_init()) {
      if (!multi) throw std::runtime_error("curl_multi_init failed");
      const CurlLibrary& curl = curl_library();
      curl.multi_setopt(multi.get(), CURLMOPT_MAXCONNECTS, max_connections);
      curl.multi_setopt(multi.get(), CURLMOPT_MAX_TOTAL_CONNECTIONS, max_connections);
      curl.multi_setopt(multi.get(), CURLMOPT_MAX_HOST_CONNECTIONS, max_connections);
    }

    // Any thread. One wake-up for a batch: a request queued behind another finds the thread
    // already woken (or not yet asleep). None from the thread itself (a job's completion
    // starting the next job): it looks at `incoming` again before it sleeps.
    void add(std::unique_ptr<Transfer> transfer) {
      bool wake = false;
      {
        std::lock_guard lock(mutex);
        wake = incoming.empty() && std::this_thread::get_id() != thread_id;
        incoming.push_back(std::move(transfer));
      }
      if (wake) curl_library().multi_wakeup(multi.get());
    }

    void close() {
      {
        std::lock_guard lock(mutex);
        closing = true;
      }
      curl_library().multi_wakeup(multi.get());
    }

    void run() {
      const CurlLibrary& curl = curl_library();
      std::vector<std::unique_ptr<Transfer>> arrived;
      {
        std::lock_guard lock(mutex);
        thread_id = std::this_thread::get_id();
      }
      bool more = false;  // requests arrived since the last look: no sleep before the next
      while (true) {
        if (!more) curl.multi_poll(multi.get(), nullptr, 0, kPollMillis, nullptr);
        {
          std::lock_guard lock(mutex);
          arrived.swap(incoming);
          if (closing && arrived.empty() && active.empty()) return;
        }
        for (std::unique_ptr<Transfer>& transfer : arrived) begin(std::move(transfer));
        arrived.clear();
        if (stop_seen.exchange(false)) abort_stopped();
        int running = 0;
        curl.multi_perform(multi.get(), &running);
        int left = 0;
        while (const CURLMsg* message = curl.multi_info_read(multi.get(), &left)) {
          if (message->msg == CURLMSG_DONE) end(message->easy_handle, message->data.result);
        }
        std::lock_guard lock(mutex);
        more = !incoming.empty();
      }
    }

   private:
    // Runs on the thread that asks for the stop; libcurl allows a wake-up from any thread.
    struct OnStop {
      State* state;
      void operator()() const noexcept {
        state->stop_seen.store(true);
        curl_library().multi_wakeup(state->multi.get());
      }
    };
    struct Active {
      std::unique_ptr<Transfer> transfer;
      std::unique_ptr<std::stop_callback<OnStop>> on_stop;
    };

    // Sets up a request and adds it to the multi handle; a job whose stop came first ends
    // without one.
    void begin(std::unique_ptr<Transfer> transfer) {
      if (transfer->stop.stop_requested()) {
        finish(std::move(transfer), JobResult::released());
        return;
      }
      try {
        prepare(*transfer);
      } catch (const std::exception& e) {
        finish(std::move(transfer), JobResult::retry(std::string("handler threw: ") + e.what()));
        return;
      }
      CURL* handle = transfer->handle.get();
      if (const CURLMcode code = curl_library().multi_add_handle(multi.get(), handle);
          code != CURLM_OK) {
        finish(std::move(transfer), JobResult::retry(std::string("curl_multi_add_handle: ") +
                                                     curl_library().multi_strerror(code)));
        return;
      }
      // Registered once the request is in the multi handle: a stop requested from here on
      // wakes the loop, which removes it (abort_stopped).
      auto on_stop = std::make_unique<std::stop_callback<OnStop>>(transfer->stop, OnStop{this});
      active.push_back({std::move(transfer), std::move(on_stop)});
    }

    void prepare(Transfer& transfer) {
      const CurlLibrary& curl = curl_library();
      auto add_header = [&curl, &transfer](const std::string& header) {
        // curl_slist_append returns the list's head (new on the first call) or null.
        curl_slist* head = curl.slist_append(transfer.headers.get(), header.c_str());
        if (head == nullptr) throw std::bad_alloc();
        if (transfer.headers == nullptr) transfer.headers.reset(head);
      };
      const Job& job = transfer.job;
      add_header("Content-Type: application/json");
      add_header("X-Pgjobd-Job-Id: " + std::to_string(job.id));
      add_header("X-Pgjobd-Job-Type: " + header_value(job.type));
      add_header("X-Pgjobd-Job-Queue: " + header_value(job.queue));
      add_header("X-Pgjobd-Job-Attempt: " + std::to_string(job.attempt));
      // Without this, curl sends "Expect: 100-continue" for large bodies and waits up to a
      // second for a 100 that many servers never send.
      add_header("Expect:");

      // A handle of an earlier request when there is one (curl_easy_reset between them, so
      // no option of one job reaches the next); connections live in the multi handle's cache.
      if (!idle.empty()) {
        transfer.handle = std::move(idle.back());
        idle.pop_back();
      } else {
        transfer.handle.reset(curl.easy_init());
        if (!transfer.handle) throw std::runtime_error("curl_easy_init failed");
      }
      CURL* handle = transfer.handle.get();
      curl.easy_setopt(handle, CURLOPT_URL, url.c_str());
      // The payload must never go to file://, ldap:// or the like. Redirects are not followed.
      curl.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
      curl.easy_setopt(handle, CURLOPT_HTTPHEADER, transfer.headers.get());
      curl.easy_setopt(handle, CURLOPT_POST, 1L);
      curl.easy_setopt(handle, CURLOPT_POSTFIELDS, job.payload.data());
      curl.easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(job.payload.size()));
      curl.easy_setopt(handle, CURLOPT_USERAGENT, user_agent.c_str());
      curl.easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
      curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // signals are process-wide
      curl.easy_setopt(handle, CURLOPT_ERRORBUFFER, transfer.error_text);
      curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, &on_header);
      curl.easy_setopt(handle, CURLOPT_HEADERDATA, &transfer);
      curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, &on_body);
      curl.easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
    }

    // A request libcurl finished (answered, failed or timed out).
    void end(CURL* handle, CURLcode code) {
      const auto it = std::find_if(active.begin(), active.end(), [handle](const Active& entry) {
        return entry.transfer->handle.get() == handle;
      });
      if (it == active.end()) return;
      Active entry = take(it);
      JobResult result = result_of(*entry.transfer, code, timeout);
      entry.on_stop.reset();
      finish(std::move(entry.transfer), std::move(result));
    }

    // Requests whose job was asked to stop: taken out of the multi handle, which closes their
    // connection, and released.
    void abort_stopped() {
      for (std::size_t i = 0; i < active.size();) {
        if (!active[i].transfer->stop.stop_requested()) {
          ++i;
          continue;
        }
        Active entry = take(active.begin() + static_cast<std::ptrdiff_t>(i));
        entry.on_stop.reset();
        finish(std::move(entry.transfer), JobResult::released());
      }
    }

    Active take(std::vector<Active>::iterator it) {
      Active entry = std::move(*it);
      *it = std::move(active.back());
      active.pop_back();
      curl_library().multi_remove_handle(multi.get(), entry.transfer->handle.get());
      return entry;
    }

    // Hands the result on last, with nothing of the transfer left: the job and its stop
    // source may be freed by the call.
    void finish(std::unique_ptr<Transfer> transfer, JobResult result) {
      HandlerDone done = std::move(transfer->done);
      if (transfer->handle) {
        curl_library().easy_reset(transfer->handle.get());
        idle.push_back(std::move(transfer->handle));
      }
      transfer.reset();
      done(std::move(result));
    }

   public:
    const std::string url;
    const Millis timeout;
    const std::size_t body_bytes;
    const std::string user_agent = std::string("pgjobd/") + kVersion;
    // Declared before the easy handles: cleaned up after them, closing the cached connections.
    MultiHandle multi;
    std::atomic<bool> stop_seen = false;

   private:
    std::mutex mutex;
    std::vector<std::unique_ptr<Transfer>> incoming;  // guarded by mutex
    bool closing = false;                             // guarded by mutex
    std::thread::id thread_id;                        // guarded by mutex
    // The transfer thread's alone:
    std::vector<Active> active;    // in the multi handle
    std::vector<EasyHandle> idle;  // at most as many as requests were in flight at once
  };

  std::shared_ptr<State> state_;
  std::thread thread_;  // last: started once the state is complete
};

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

Handler make_http_handler(const HandlerConfig& config, std::size_t max_result_bytes,
                          int concurrency) {
  curl_library();  // a library that cannot be loaded stops the start, not every job
  const Millis timeout = config.timeout.count() > 0 ? config.timeout : kDefaultTimeout;
  auto transfers = std::make_shared<TransferThread>(
      config.http_url, timeout,
      std::max(kMaxBodyKept, max_result_bytes == 0 ? 0 : max_result_bytes + 1),
      static_cast<long>(std::max(concurrency, 1)));
  return AsyncHandler([transfers](const Job& job, std::stop_token stop, HandlerDone done) {
    transfers->start(job, std::move(stop), std::move(done));
  });
}

}  // namespace pgjobd
