// The http handler: POSTs a job's payload with libcurl, or with its own client for plain
// http:// to an IP literal (plain_http.hpp), and maps the response to a JobResult.
#include "handlers/http_handler.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "handlers/curl_library.hpp"
#include "handlers/plain_http.hpp"
#include "handlers/unique_fd.hpp"
#include "pgjobd/version.hpp"
#include "text/errno_text.hpp"
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

// Only made once the library is loaded (handles come from it).
struct CurlDeleter {
  void operator()(CURL* handle) const { curl_library().easy_cleanup(handle); }
};

using EasyHandle = std::unique_ptr<CURL, CurlDeleter>;
// CURLM and CURL are both void: a deleter of its own.
struct MultiDeleter {
  void operator()(CURLM* multi) const { curl_library().multi_cleanup(multi); }
};
using MultiHandle = std::unique_ptr<CURLM, MultiDeleter>;

}  // namespace

// Retry-After is delay-seconds or an HTTP-date (RFC 9110 §10.2.3); a date in the past is 0.
// Saturates at kMaxRetryAfter: a number too long for any integer, or a date centuries
// ahead, is a long wait, not an overflow (the job runner then caps it at retry.max_delay).
std::optional<Millis> parse_retry_after(std::string_view value) {
  constexpr long long kMaxSeconds =
      std::chrono::duration_cast<std::chrono::seconds>(kMaxRetryAfter).count();
  value = trim_http_space(value);
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

// Runs on the thread that asks for a stop; an eventfd write is safe from any thread.
void wake_up(int event_fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t ignored = ::write(event_fd, &one, sizeof one);
}

// A stop requested for a request in flight: the transfer thread looks for stopped requests
// once woken (TransferThreads::State::abort_stopped).
struct OnStop {
  std::atomic<bool>* stop_seen;
  int wake_fd;
  void operator()() const noexcept {
    stop_seen->store(true);
    wake_up(wake_fd);
  }
};

// `text` as an HTTP header value (header_value), appended to `out`.
void append_header_value(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
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
}

void append_number(std::string& out, long long number) {
  char digits[24];
  const auto [end, error] = std::to_chars(std::begin(digits), std::end(digits), number);
  out.append(digits, end);
}

// A job handed to the transfer thread, waiting for it to start the request.
struct Request {
  const Job* job;  // outlives the call of done (AsyncHandler::Start)
  std::stop_token stop;
  HandlerDone done;
};

struct Transfer;

// A connection of the own client (plain_http.hpp): in the epoll set from its start to its
// close (data.ptr), reading whenever it is readable; while idle, an event means the peer
// closed it (or sent what nobody asked for), and it is closed.
struct PlainConnection {
  UniqueFd fd;
  std::size_t index = 0;         // in State::connections
  Transfer* transfer = nullptr;  // the request on it; null while idle
  bool connecting = false;       // connect() not finished yet
  bool used = false;             // it carried a request before
  bool writing = false;          // EPOLLOUT is in the set
  std::size_t sent = 0;          // of the head and the payload
  std::string head;              // the request line and headers, buffer kept between requests
  PlainHttpResponse response;
};

// One request in flight: its job, and what libcurl's callbacks collect. Kept for a later
// request once its job has ended, with its easy handle, whose options (pointing into this
// object) stay set, and its header lines, so starting a request allocates nothing once the
// buffers have grown (curl_easy_reset and a header list built with curl_slist_append cost a
// dozen allocations per request; bench/README.md). Never moved: libcurl holds its address.
struct Transfer {
  explicit Transfer(std::size_t body_bytes_in) : body_bytes(body_bytes_in), body(body_bytes_in) {}
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  // The header lines: three fixed, four naming the job; kept as curl_slist nodes of this
  // object's own (libcurl reads the list, never frees or changes it).
  static constexpr std::size_t kContentType = 0;
  static constexpr std::size_t kJobId = 1;
  static constexpr std::size_t kJobType = 2;
  static constexpr std::size_t kJobQueue = 3;
  static constexpr std::size_t kJobAttempt = 4;
  // Without it, curl sends "Expect: 100-continue" for large bodies and waits up to a second
  // for a 100 that many servers never send.
  static constexpr std::size_t kExpect = 5;
  // A line of ours rather than CURLOPT_USERAGENT, with which libcurl formats the line into a
  // new allocation for every request.
  static constexpr std::size_t kUserAgent = 6;
  static constexpr std::size_t kHeaderCount = 7;

  // The fixed lines in place, the job's empty until set_headers.
  static std::array<std::string, kHeaderCount> fixed_header_lines() {
    std::array<std::string, kHeaderCount> lines;
    lines[kContentType] = "Content-Type: application/json";
    lines[kExpect] = "Expect:";
    lines[kUserAgent] = std::string("User-Agent: pgjobd/") + kVersion;
    return lines;
  }

  // Sets the lines for job `of` and links the nodes (a line's buffer may have moved).
  void set_headers(const Job& of) {
    std::string& id = header_lines[kJobId];
    id.assign("X-Pgjobd-Job-Id: ");
    append_number(id, of.id);
    header_lines[kJobType].assign("X-Pgjobd-Job-Type: ");
    append_header_value(header_lines[kJobType], of.type);
    header_lines[kJobQueue].assign("X-Pgjobd-Job-Queue: ");
    append_header_value(header_lines[kJobQueue], of.queue);
    header_lines[kJobAttempt].assign("X-Pgjobd-Job-Attempt: ");
    append_number(header_lines[kJobAttempt], of.attempt);
    for (std::size_t i = 0; i < kHeaderCount; ++i) {
      header_nodes[i].data = header_lines[i].data();
      header_nodes[i].next = i + 1 < kHeaderCount ? &header_nodes[i + 1] : nullptr;
    }
  }

  // Ready for the next request: nothing of this one's job or response is left.
  void clear() {
    job = nullptr;
    stop = {};
    done = nullptr;
    body = HeadBuffer(body_bytes);
    retry_after.reset();
    header_ended = false;
    error_text[0] = '\0';
    connection = nullptr;
    sent_again = false;
  }

  const Job* job = nullptr;
  std::stop_token stop;
  HandlerDone done;
  // Registered once the request is in the multi handle: a stop requested from then on wakes
  // the transfer thread, which removes it.
  std::optional<std::stop_callback<OnStop>> on_stop;
  EasyHandle handle;
  std::size_t active_index = 0;  // its place in the transfer thread's list in flight
  std::array<std::string, kHeaderCount> header_lines = fixed_header_lines();
  std::array<curl_slist, kHeaderCount> header_nodes{};
  const std::size_t body_bytes;
  // The first bytes of the body: kMaxBodyKept for last_error, and max_result_bytes + 1 for
  // the result of a 2xx (the one over tells the job runner it was longer).
  HeadBuffer body;
  std::optional<Millis> retry_after;
  bool header_ended = false;  // the blank line after the response's headers came
  char error_text[CURL_ERROR_SIZE] = {};
  // The own client's: the connection carrying it (null while it waits for one), when it
  // started (its timeout counts from then), and whether it was sent again on a new
  // connection after a kept one failed before any answer (once, as libcurl does).
  PlainConnection* connection = nullptr;
  std::chrono::steady_clock::time_point started;
  bool sent_again = false;
};
std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    transfer->retry_after.reset();  // a new response (e.g. after 100 Continue) starts
    transfer->header_ended = false;
  } else if (trim_http_space(line).empty()) {
    transfer->header_ended = true;
  } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    if (equals_ignoring_case(trim_http_space(line.substr(0, colon)), "retry-after")) {
      transfer->retry_after = parse_retry_after(line.substr(colon + 1));
    }
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

// What a response means for its job, whichever client read it (`content_type` may be null).
JobResult result_of_response(Transfer& transfer, long status, const char* content_type) {
  if (status >= 200 && status < 300) return done_with_body(transfer, content_type);
  std::string error = "HTTP " + std::to_string(status);
  const std::string_view body = transfer.body.bytes();
  if (!body.empty()) error.append(": ").append(body.substr(0, kMaxBodyKept));
  if (is_retryable_status(status)) return JobResult::retry(std::move(error), transfer.retry_after);
  return JobResult::dead(std::move(error));
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
  char* content_type = nullptr;  // libcurl's, valid until the handle's next transfer
  if (status >= 200 && status < 300) {
    curl.easy_getinfo(transfer.handle.get(), CURLINFO_CONTENT_TYPE, &content_type);
  }
  return result_of_response(transfer, status, content_type);
}

// The transfer thread's own State (TransferThreads::State), on that thread; else null.
thread_local const void* current_transfer_thread = nullptr;

// One http handler's requests, all driven by one thread through a libcurl multi handle: a
// job's worker hands its request over and is free for the next job (with a thread per
// request, each slept and was woken on its own: half the daemon's samples were thread
// switches; bench/README.md). The thread sleeps in epoll_wait on the sockets libcurl asks it
// to watch (CURLMOPT_SOCKETFUNCTION) and an eventfd for wake-ups, and hands libcurl only the
// sockets that are ready and the timers that are due (curl_multi_socket_action): with
// curl_multi_poll and curl_multi_perform, every wake-up polled every connection and looked
// at every transfer. The multi handle keeps one connection cache for all requests (HTTP/1.1
// keep-alive, DNS, TLS sessions), at most `max_connections` open (worker.concurrency: no
// more requests are ever in flight at once).
//
// When the URL is plain http:// to an IP literal and no proxy applies (plain_http_target),
// the thread carries every request with its own client instead, on the same epoll loop:
// libcurl's work per request (a connection struct, URL parse, header building and matching,
// two polls) cost more CPU than a whole request of wrk's (bench/README.md). Its connections
// are kept and bounded as libcurl's were, its timeouts are the thread's own deadlines.
//
// Several such threads may share one handler's requests (each its own multi handle, epoll
// set and connections, its share of max_connections), as wrk's threads do: where cores are
// many, one thread's share of one core would cap the handler (default_http_transfer_threads
// says how many; on 2 cores a second one cost more CPU than it bought, bench/README.md).
class TransferThreads {
 public:
  // `threads` transfer threads (at least one, at most one per connection), the connections
  // shared out between them: together never more than `max_connections`.
  TransferThreads(const std::string& url, Millis timeout, std::size_t body_bytes,
                  long max_connections, int threads) {
    const long count = std::clamp<long>(threads, 1, std::max(max_connections, 1L));
    const std::optional<PlainHttpTarget> plain = plain_http_target(url);
    for (long i = 0; i < count; ++i) {
      const long share = max_connections / count + (i < max_connections % count ? 1 : 0);
      shards_.push_back(Shard{std::make_shared<State>(url, plain, timeout, body_bytes, share), {}});
    }
    try {
      for (Shard& shard : shards_) {
        shard.thread = std::thread([state = shard.state] { state->run(); });
      }
    } catch (...) {
      stop_threads();
      throw;
    }
  }
  TransferThreads(const TransferThreads&) = delete;
  TransferThreads& operator=(const TransferThreads&) = delete;

  // Their requests still in flight finish first (a reload's old handler ends with its jobs).
  ~TransferThreads() { stop_threads(); }

  // Never calls `done` itself (a job stopped already ends on a transfer thread, at once):
  // the worker pool may call this from a job's completion, which must not recurse.
  void start(const Job& job, std::stop_token stop, HandlerDone done) {
    pick().add(Request{&job, std::move(stop), std::move(done)});
  }

 private:
  struct State;

  void stop_threads() {
    for (Shard& shard : shards_) shard.state->close();
    for (Shard& shard : shards_) {
      if (!shard.thread.joinable()) continue;
      // The last reference may go with a job's completion, on a transfer thread: it then
      // ends on its own once nothing is in flight, owning its state. The others have nothing
      // in flight by then (each request's completion holds a reference): they end at once.
      if (shard.thread.get_id() == std::this_thread::get_id()) {
        shard.thread.detach();
      } else {
        shard.thread.join();
      }
    }
  }

  // The transfer thread that calls (a job's completion starting the next job) when it has a
  // free connection: no wake-up. Else the one with the most free connections: as long as no
  // more requests are in flight than connections in all, none waits for one of its own
  // (whichever took the last request had the most free, so all were as full).
  State& pick() {
    State* best = nullptr;
    long most_free = 0;
    for (const Shard& shard : shards_) {
      const long free = shard.state->free_connections();
      if (shard.state.get() == current_transfer_thread && free > 0) return *shard.state;
      if (best == nullptr || free > most_free) {
        best = shard.state.get();
        most_free = free;
      }
    }
    return *best;
  }

  struct State {
    State(std::string url_in, std::optional<PlainHttpTarget> plain_in, Millis timeout_in,
          std::size_t body_bytes_in, long max_connections_in)
        : url(std::move(url_in)),
          plain(std::move(plain_in)),
          timeout(timeout_in),
          body_bytes(body_bytes_in),
          max_connections(max_connections_in),
          epoll(::epoll_create1(EPOLL_CLOEXEC)),
          wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
          multi(curl_library().multi_init()) {
      if (!epoll.valid()) throw std::system_error(errno, std::generic_category(), "epoll_create1");
      if (!wake.valid()) throw std::system_error(errno, std::generic_category(), "eventfd");
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.fd = wake.get();
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &event) != 0) {
        throw std::system_error(errno, std::generic_category(), "epoll_ctl");
      }
      if (!multi) throw std::runtime_error("curl_multi_init failed");
      const CurlLibrary& curl = curl_library();
      curl.multi_setopt(multi.get(), CURLMOPT_MAXCONNECTS, max_connections);
      curl.multi_setopt(multi.get(), CURLMOPT_MAX_TOTAL_CONNECTIONS, max_connections);
      curl.multi_setopt(multi.get(), CURLMOPT_MAX_HOST_CONNECTIONS, max_connections);
      curl.multi_setopt(multi.get(), CURLMOPT_SOCKETFUNCTION, &on_socket);
      curl.multi_setopt(multi.get(), CURLMOPT_SOCKETDATA, this);
      curl.multi_setopt(multi.get(), CURLMOPT_TIMERFUNCTION, &on_timer);
      curl.multi_setopt(multi.get(), CURLMOPT_TIMERDATA, this);
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;

    // Connections not taken by a request in flight or queued (may be below 0 for a moment
    // when two threads pick this one at once: libcurl then queues the request until one is
    // free).
    long free_connections() const {
      return max_connections - in_flight.load(std::memory_order_relaxed);
    }

    // Any thread. One wake-up for a batch: a request queued behind another finds the thread
    // already woken (or not yet asleep). None from the thread itself (a job's completion
    // starting the next job): it looks at `incoming` again before it sleeps.
    void add(Request request) {
      in_flight.fetch_add(1, std::memory_order_relaxed);
      bool wake_thread = false;
      {
        std::lock_guard lock(mutex);
        wake_thread = incoming.empty() && current_transfer_thread != this;
        incoming.push_back(std::move(request));
      }
      if (wake_thread) wake_up(wake.get());
    }

    void close() {
      {
        std::lock_guard lock(mutex);
        closing = true;
      }
      wake_up(wake.get());
    }

    void run() {
      const CurlLibrary& curl = curl_library();
      std::vector<Request> arrived;
      std::array<epoll_event, kMaxEvents> events{};
      current_transfer_thread = this;
      bool more = false;  // requests arrived since the last look: no sleep before the next
      while (true) {
        const int ready = ::epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()),
                                       more ? 0 : wait_millis());
        int running = 0;
        for (int i = 0; i < ready; ++i) {
          const epoll_event& event = events[static_cast<std::size_t>(i)];
          const std::uint32_t what = event.events;
          if (event.data.u64 == static_cast<std::uint64_t>(wake.get())) {
            std::uint64_t count = 0;
            [[maybe_unused]] const ssize_t ignored = ::read(wake.get(), &count, sizeof count);
            continue;
          }
          if (plain) {
            on_connection_event(*static_cast<PlainConnection*>(event.data.ptr), what);
            continue;
          }
          const int fd = event.data.fd;
          if (Watch& watch = watch_of(fd); !watch.wanted) {
            unwatch(fd, watch);  // an idle connection in the cache (on_socket)
            continue;
          }
          int mask = 0;
          if ((what & EPOLLIN) != 0) mask |= CURL_CSELECT_IN;
          if ((what & EPOLLOUT) != 0) mask |= CURL_CSELECT_OUT;
          if ((what & (EPOLLERR | EPOLLHUP)) != 0) mask |= CURL_CSELECT_ERR;
          curl.multi_socket_action(multi.get(), fd, mask, &running);
        }
        {
          std::lock_guard lock(mutex);
          arrived.swap(incoming);
          if (closing && arrived.empty() && active.empty()) return;
        }
        for (Request& request : arrived) begin(std::move(request));
        arrived.clear();
        if (stop_seen.exchange(false)) abort_stopped();
        if (plain) {
          if (next_deadline && *next_deadline <= std::chrono::steady_clock::now()) time_out();
          start_waiting();
          std::lock_guard lock(mutex);
          more = !incoming.empty();
          continue;
        }
        // The requests just added are due at once (libcurl sets a 0 ms timer for them).
        if (timer_due && *timer_due <= std::chrono::steady_clock::now()) {
          timer_due.reset();  // libcurl sets the next one from within
          curl.multi_socket_action(multi.get(), CURL_SOCKET_TIMEOUT, 0, &running);
        }
        int left = 0;
        while (const CURLMsg* message = curl.multi_info_read(multi.get(), &left)) {
          if (message->msg == CURLMSG_DONE) end(message->easy_handle, message->data.result);
        }
        std::lock_guard lock(mutex);
        more = !incoming.empty();
      }
    }

   private:
    static constexpr std::size_t kMaxEvents = 128;

    // What the epoll set holds for one descriptor (on_socket).
    struct Watch {
      bool connection = false;  // opened by on_open: on_close is called before it closes
      bool wanted = false;      // libcurl watches it (until CURL_POLL_REMOVE)
      bool in_set = false;      // in the epoll set, for `events`
      std::uint32_t events = 0;
    };

    // libcurl's CURLMOPT_SOCKETFUNCTION: which events to watch on one of its sockets.
    static int on_socket(CURL* /*handle*/, curl_socket_t socket, int what, void* user,
                         void* /*socket_data*/) {
      auto* state = static_cast<State*>(user);
      Watch& watch = state->watch_of(socket);
      if (what == CURL_POLL_REMOVE) {
        watch.wanted = false;
        // A connection going back to the cache stays in the epoll set: the next request on
        // it asks for the same events, and taking it out and putting it back cost 1.6
        // epoll_ctl calls per request (bench/README.md). An event while it idles (the peer
        // closing it) takes it out then (run); on_close before libcurl closes it. A socket
        // libcurl opened without on_open (a resolver's) may be closed unannounced, and its
        // number reused: out at once.
        if (!watch.connection) state->unwatch(socket, watch);
        return 0;
      }
      epoll_event event{};
      if ((what & CURL_POLL_IN) != 0) event.events |= EPOLLIN;
      if ((what & CURL_POLL_OUT) != 0) event.events |= EPOLLOUT;
      event.data.fd = socket;
      watch.wanted = true;
      if (watch.in_set && watch.events == event.events) return 0;
      if (::epoll_ctl(state->epoll.get(), watch.in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, socket,
                      &event) != 0) {
        // Our record was wrong (a descriptor closed and reused): the other operation.
        if (::epoll_ctl(state->epoll.get(), watch.in_set ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket,
                        &event) != 0) {
          return -1;  // libcurl fails the transfers on this socket
        }
      }
      watch.in_set = true;
      watch.events = event.events;
      return 0;
    }

    // CURLOPT_OPENSOCKETFUNCTION: a connection's socket, known from here to on_close.
    static curl_socket_t on_open(void* user, curlsocktype /*purpose*/, curl_sockaddr* address) {
      const int socket =
          ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
      if (socket < 0) return CURL_SOCKET_BAD;
      auto* state = static_cast<State*>(user);
      state->watch_of(socket) = Watch{.connection = true};
      return socket;
    }

    // CURLOPT_CLOSESOCKETFUNCTION: out of the epoll set before its number can be reused.
    static int on_close(void* user, curl_socket_t socket) {
      auto* state = static_cast<State*>(user);
      Watch& watch = state->watch_of(socket);
      state->unwatch(socket, watch);
      watch = Watch{};
      return ::close(socket);
    }

    // libcurl's CURLMOPT_TIMERFUNCTION: when to call it with CURL_SOCKET_TIMEOUT (-1: never).
    static int on_timer(CURLM* /*multi*/, long timeout_ms, void* user) {
      auto* state = static_cast<State*>(user);
      if (timeout_ms < 0) {
        state->timer_due.reset();
      } else {
        state->timer_due = std::chrono::steady_clock::now() + Millis(timeout_ms);
      }
      return 0;
    }

    Watch& watch_of(curl_socket_t socket) {
      const auto index = static_cast<std::size_t>(socket);
      if (index >= watches.size()) watches.resize(index + 1);
      return watches[index];
    }
    void unwatch(curl_socket_t socket, Watch& watch) {
      // Fails when the socket was closed already, which took it out.
      if (watch.in_set) ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, socket, nullptr);
      watch.in_set = false;
    }

    // How long epoll_wait may sleep: until libcurl's timer is due, rounded up (woken a
    // fraction of a millisecond early, the thread would spin), kPollMillis at most.
    int wait_millis() const {
      const std::optional<std::chrono::steady_clock::time_point>& due =
          plain ? next_deadline : timer_due;
      if (!due) return kPollMillis;
      const auto left = *due - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return 0;
      return static_cast<int>(
          std::min<long long>(std::chrono::ceil<Millis>(left).count(), kPollMillis));
    }

    // Sets up a request and adds it to the multi handle; a job whose stop came first ends
    // without one.
    void begin(Request request) {
      if (request.stop.stop_requested()) {
        hand_back(request.done, JobResult::released());
        return;
      }
      std::unique_ptr<Transfer> transfer;
      try {
        transfer = prepare(request);
      } catch (const std::exception& e) {
        hand_back(request.done, JobResult::retry(std::string("handler threw: ") + e.what()));
        return;
      }
      if (plain) {
        Transfer& started = *transfer;
        transfer->on_stop.emplace(transfer->stop, OnStop{&stop_seen, wake.get()});
        transfer->active_index = active.size();
        active.push_back(std::move(transfer));
        const auto deadline = started.started + timeout;
        if (!next_deadline || deadline < *next_deadline) next_deadline = deadline;
        start_plain(started);
        return;
      }
      if (const CURLMcode code =
              curl_library().multi_add_handle(multi.get(), transfer->handle.get());
          code != CURLM_OK) {
        finish(std::move(transfer), JobResult::retry(std::string("curl_multi_add_handle: ") +
                                                     curl_library().multi_strerror(code)));
        return;
      }
      // From here on a stop wakes the loop, which removes the request (abort_stopped).
      transfer->on_stop.emplace(transfer->stop, OnStop{&stop_seen, wake.get()});
      transfer->active_index = active.size();
      active.push_back(std::move(transfer));
    }

    // A new transfer's easy handle, with the options every request of this handler shares
    // (pointing into the transfer, which never moves).
    void set_up_handle(Transfer& transfer) {
      const CurlLibrary& curl = curl_library();
      transfer.handle.reset(curl.easy_init());
      if (!transfer.handle) throw std::runtime_error("curl_easy_init failed");
      CURL* handle = transfer.handle.get();
      curl.easy_setopt(handle, CURLOPT_URL, url.c_str());
      // The payload must never go to file://, ldap:// or the like. Redirects are not
      // followed.
      curl.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
      curl.easy_setopt(handle, CURLOPT_HTTPHEADER, transfer.header_nodes.data());
      curl.easy_setopt(handle, CURLOPT_POST, 1L);
      curl.easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
      curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // signals are process-wide
      curl.easy_setopt(handle, CURLOPT_ERRORBUFFER, transfer.error_text);
      curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, &on_header);
      curl.easy_setopt(handle, CURLOPT_HEADERDATA, &transfer);
      curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, &on_body);
      curl.easy_setopt(handle, CURLOPT_WRITEDATA, &transfer);
      curl.easy_setopt(handle, CURLOPT_PRIVATE, &transfer);
      curl.easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, &on_open);
      curl.easy_setopt(handle, CURLOPT_OPENSOCKETDATA, this);
      curl.easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, &on_close);
      curl.easy_setopt(handle, CURLOPT_CLOSESOCKETDATA, this);
    }

    // A transfer of an earlier request when there is one (its handle's options, set once,
    // still point at it), else a new one (with no easy handle when the own client carries
    // the requests).
    std::unique_ptr<Transfer> prepare(Request& request) {
      const CurlLibrary& curl = curl_library();
      std::unique_ptr<Transfer> transfer;
      if (!idle.empty()) {
        transfer = std::move(idle.back());
        idle.pop_back();
      } else {
        transfer = std::make_unique<Transfer>(body_bytes);
        if (!plain) set_up_handle(*transfer);
      }
      const Job& job = *request.job;
      transfer->set_headers(job);
      if (!plain) {
        CURL* handle = transfer->handle.get();
        curl.easy_setopt(handle, CURLOPT_POSTFIELDS, job.payload.data());
        curl.easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(job.payload.size()));
      }
      transfer->started = std::chrono::steady_clock::now();
      transfer->job = request.job;
      transfer->stop = std::move(request.stop);
      transfer->done = std::move(request.done);
      return transfer;
    }

    // A request libcurl finished (answered, failed or timed out).
    void end(CURL* handle, CURLcode code) {
      char* data = nullptr;
      curl_library().easy_getinfo(handle, CURLINFO_PRIVATE, &data);
      auto* transfer = reinterpret_cast<Transfer*>(data);
      if (transfer == nullptr || transfer->active_index >= active.size() ||
          active[transfer->active_index].get() != transfer) {
        return;
      }
      std::unique_ptr<Transfer> ended = take(transfer->active_index);
      JobResult result = result_of(*ended, code, timeout);
      finish(std::move(ended), std::move(result));
    }

    // Requests whose job was asked to stop: taken out of the multi handle, which closes their
    // connection, and released.
    void abort_stopped() {
      for (std::size_t i = 0; i < active.size();) {
        if (!active[i]->stop.stop_requested()) {
          ++i;
          continue;
        }
        detach_plain(*active[i]);
        finish(take(i), JobResult::released());
      }
    }

    std::unique_ptr<Transfer> take(std::size_t index) {
      std::unique_ptr<Transfer> transfer = std::move(active[index]);
      if (index + 1 < active.size()) {
        active[index] = std::move(active.back());
        active[index]->active_index = index;
      }
      active.pop_back();
      if (!plain) curl_library().multi_remove_handle(multi.get(), transfer->handle.get());
      return transfer;
    }

    // Hands the result on last, with nothing of the transfer left: the job and its stop
    // source may be freed by the call.
    void finish(std::unique_ptr<Transfer> transfer, JobResult result) {
      HandlerDone done = std::move(transfer->done);
      transfer->on_stop.reset();
      transfer->clear();
      idle.push_back(std::move(transfer));
      hand_back(done, std::move(result));
    }

    // The request's connection is free before its job ends: the completion may start the
    // next job, which then finds room here (TransferThreads::pick).
    void hand_back(const HandlerDone& done, JobResult result) {
      in_flight.fetch_sub(1, std::memory_order_relaxed);
      done(std::move(result));
    }

    // The own client (plain_http.hpp), used for every request of a handler whose URL it can
    // carry (`plain`): one sendmsg and one read per request on a kept connection, nothing
    // allocated once the buffers have grown.

    // Puts a request (in `active`) on an idle connection (unless `fresh`), a new one, or in
    // line for one when `max_connections` are busy. May end it (a connection that cannot be
    // opened).
    void start_plain(Transfer& transfer, bool fresh = false) {
      PlainConnection* connection = nullptr;
      if (!idle_connections.empty() && !fresh) {
        connection = idle_connections.back();
        idle_connections.pop_back();
      } else if (static_cast<long>(connections.size()) < max_connections) {
        std::string error;
        connection = open_connection(error);
        if (connection == nullptr) {
          end_plain(transfer, JobResult::retry(std::move(error)));
          return;
        }
      } else {
        waiting.push_back(&transfer);
        return;
      }
      connection->transfer = &transfer;
      transfer.connection = connection;
      connection->response.reset();
      connection->sent = 0;
      build_head(*connection, transfer);
      if (!connection->connecting) send_request(*connection);
    }

    // Requests in line for a connection, as connections come free (one iteration's worth).
    void start_waiting() {
      while (!waiting.empty() && (!idle_connections.empty() ||
                                  static_cast<long>(connections.size()) < max_connections)) {
        Transfer* transfer = waiting.front();
        waiting.pop_front();
        start_plain(*transfer);
      }
    }

    // The request as libcurl sends it: the same header lines (Transfer's), Accept and Host
    // as libcurl adds them, the length of the payload.
    void build_head(PlainConnection& connection, const Transfer& transfer) const {
      std::string& head = connection.head;
      head.assign("POST ");
      head += plain->path;
      head += " HTTP/1.1\r\nHost: ";
      head += plain->host_header;
      head += "\r\nAccept: */*\r\n";
      for (std::size_t i = 0; i < Transfer::kHeaderCount; ++i) {
        if (i == Transfer::kExpect) continue;  // libcurl's alone: it sends no Expect here
        head += transfer.header_lines[i];
        head += "\r\n";
      }
      head += "Content-Length: ";
      append_number(head, static_cast<long long>(transfer.job->payload.size()));
      head += "\r\n\r\n";
    }

    // A non-blocking connection to the target, in the epoll set; null with `error` set.
    PlainConnection* open_connection(std::string& error) {
      const auto& address = plain->address;
      UniqueFd fd(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd.valid()) {
        error = connect_error(errno);
        return nullptr;
      }
      const int on = 1;  // as libcurl: a request goes out whole at once
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      bool connecting = false;
      if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), plain->address_length) !=
          0) {
        if (errno != EINPROGRESS) {
          error = connect_error(errno);
          return nullptr;
        }
        connecting = true;
      }
      auto connection = std::make_unique<PlainConnection>();
      connection->fd = std::move(fd);
      connection->connecting = connecting;
      connection->writing = connecting;
      epoll_event event{};
      event.events = EPOLLIN | (connecting ? EPOLLOUT : 0U);
      event.data.ptr = connection.get();
      if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, connection->fd.get(), &event) != 0) {
        error = std::string("epoll_ctl: ") + errno_text(errno);
        return nullptr;
      }
      connection->index = connections.size();
      connections.push_back(std::move(connection));
      return connections.back().get();
    }

    // libcurl's wording, for the same failures.
    std::string connect_error(int error) const {
      return "Failed to connect to " + plain->host + " port " + std::to_string(plain->port) + ": " +
             errno_text(error);
    }

    void watch_output(PlainConnection& connection, bool on) {
      if (connection.writing == on) return;
      epoll_event event{};
      event.events = EPOLLIN | (on ? EPOLLOUT : 0U);
      event.data.ptr = &connection;
      ::epoll_ctl(epoll.get(), EPOLL_CTL_MOD, connection.fd.get(), &event);
      connection.writing = on;
    }

    // Writes what the socket takes of the head and the payload; false when the request ended
    // (or went to another connection) on a failure.
    bool send_request(PlainConnection& connection) {
      const std::string_view payload = connection.transfer->job->payload;
      const std::size_t total = connection.head.size() + payload.size();
      while (connection.sent < total) {
        std::array<iovec, 2> parts{};
        std::size_t count = 0;
        const std::size_t sent = connection.sent;
        if (sent < connection.head.size()) {
          parts[count++] = {connection.head.data() + sent, connection.head.size() - sent};
        }
        const std::size_t from = sent > connection.head.size() ? sent - connection.head.size() : 0;
        if (from < payload.size()) {
          parts[count++] = {const_cast<char*>(payload.data()) + from, payload.size() - from};
        }
        msghdr message{};
        message.msg_iov = parts.data();
        message.msg_iovlen = count;
        const ssize_t written = ::sendmsg(connection.fd.get(), &message, MSG_NOSIGNAL);
        if (written < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) {
            watch_output(connection, true);
            return true;
          }
          lost(connection, std::string("Send failure: ") + errno_text(errno));
          return false;
        }
        connection.sent += static_cast<std::size_t>(written);
      }
      watch_output(connection, false);
      return true;
    }

    void on_connection_event(PlainConnection& connection, std::uint32_t what) {
      if (connection.transfer == nullptr) {
        close_connection(connection);  // idle: the peer closed it, or sent unasked
        return;
      }
      if (connection.connecting) {
        if ((what & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
        int error = 0;
        socklen_t length = sizeof error;
        ::getsockopt(connection.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
          fail_plain(connection, connect_error(error));
          return;
        }
        connection.connecting = false;
        if (!send_request(connection)) return;
      } else if ((what & EPOLLOUT) != 0 && connection.writing) {
        if (!send_request(connection)) return;
      }
      if ((what & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) receive(connection);
    }

    // One read: what came goes to the response's parser.
    void receive(PlainConnection& connection) {
      const ssize_t got = ::read(connection.fd.get(), read_buffer.data(), read_buffer.size());
      if (got < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        lost(connection, std::string("Recv failure: ") + errno_text(errno));
        return;
      }
      PlainHttpResponse& response = connection.response;
      if (got == 0) {
        if (response.end_of_stream() == PlainHttpResponse::Progress::kDone) {
          complete(connection, false);
        } else {
          lost(connection, response.error());
        }
        return;
      }
      std::size_t used = 0;
      switch (response.feed({read_buffer.data(), static_cast<std::size_t>(got)},
                            connection.transfer->body, used)) {
        case PlainHttpResponse::Progress::kMore:
          return;
        case PlainHttpResponse::Progress::kDone:
          complete(connection, used < static_cast<std::size_t>(got));
          return;
        case PlainHttpResponse::Progress::kError:
          fail_plain(connection, response.error());
          return;
      }
    }

    // The connection failed: a request on a kept connection that had no answer yet goes
    // again on a new one (the peer closed it as it was reused; another idle one may be
    // closed too); any other ends as a retry.
    void lost(PlainConnection& connection, std::string text) {
      Transfer& transfer = *connection.transfer;
      if (connection.used && !connection.response.started() && !transfer.sent_again) {
        transfer.sent_again = true;
        close_connection(connection);
        start_plain(transfer, true);
        return;
      }
      fail_plain(connection, std::move(text));
    }

    void fail_plain(PlainConnection& connection, std::string text) {
      Transfer& transfer = *connection.transfer;
      close_connection(connection);
      end_plain(transfer, JobResult::retry(std::move(text)));
    }

    // A whole response: the connection is kept for the next request when both sides said
    // so, the request went out whole and nothing came after the response.
    void complete(PlainConnection& connection, bool bytes_after) {
      Transfer& transfer = *connection.transfer;
      const PlainHttpResponse& response = connection.response;
      transfer.retry_after = response.retry_after();
      JobResult result = result_of_response(
          transfer, response.status(),
          response.has_content_type() ? response.content_type().c_str() : nullptr);
      const bool keep = response.keep_alive() && !bytes_after &&
                        connection.sent == connection.head.size() + transfer.job->payload.size();
      if (keep) {
        connection.transfer = nullptr;
        transfer.connection = nullptr;
        connection.used = true;
        idle_connections.push_back(&connection);
      } else {
        close_connection(connection);
      }
      end_plain(transfer, std::move(result));
    }

    // Out of `active` and handed back; its connection already let go.
    void end_plain(Transfer& transfer, JobResult result) {
      finish(take(transfer.active_index), std::move(result));
    }

    // A request's connection closed, or its place in line given up (stop, timeout).
    void detach_plain(Transfer& transfer) {
      if (!plain) return;
      if (transfer.connection != nullptr) {
        close_connection(*transfer.connection);
      } else {
        std::erase(waiting, &transfer);
      }
    }

    void close_connection(PlainConnection& connection) {
      if (connection.transfer != nullptr) connection.transfer->connection = nullptr;
      if (connection.transfer == nullptr) std::erase(idle_connections, &connection);
      const std::size_t index = connection.index;
      if (index + 1 < connections.size()) {
        connections[index] = std::move(connections.back());
        connections[index]->index = index;
      }
      connections.pop_back();  // closing the descriptor takes it out of the epoll set
    }

    // Requests past their timeout end as libcurl's would; the next deadline is the earliest
    // left (a request that ended since only costs an early look).
    void time_out() {
      const auto now = std::chrono::steady_clock::now();
      next_deadline.reset();
      for (std::size_t i = 0; i < active.size();) {
        Transfer& transfer = *active[i];
        const auto deadline = transfer.started + timeout;
        if (deadline > now) {
          if (!next_deadline || deadline < *next_deadline) next_deadline = deadline;
          ++i;
          continue;
        }
        const auto elapsed = std::chrono::duration_cast<Millis>(now - transfer.started).count();
        std::string text = "timeout after " + std::to_string(timeout.count()) +
                           "ms: Operation timed out after " + std::to_string(elapsed) +
                           " milliseconds with " + std::to_string(transfer.body.total()) +
                           " bytes received";
        detach_plain(transfer);
        end_plain(transfer, JobResult::retry(std::move(text)));  // active[i] is another now
      }
    }

   public:
    const std::string url;
    const std::optional<PlainHttpTarget> plain;  // set: the own client carries every request
    const Millis timeout;
    const std::size_t body_bytes;
    const long max_connections;  // this thread's share of the handler's

   private:
    // Declared before the multi handle: its clean-up may still tell on_socket to stop
    // watching the connections it closes.
    UniqueFd epoll;
    UniqueFd wake;  // an eventfd: readable once another thread wants the transfer thread
    std::vector<Watch> watches;                                      // by descriptor
    std::optional<std::chrono::steady_clock::time_point> timer_due;  // on_timer's
    MultiHandle multi;
    std::atomic<bool> stop_seen = false;
    std::mutex mutex;
    std::vector<Request> incoming;    // guarded by mutex
    bool closing = false;             // guarded by mutex
    std::atomic<long> in_flight = 0;  // requests added and not yet handed back
    // The transfer thread's alone, cleaned up before the multi handle (their easy handles are
    // out of it by then):
    std::vector<std::unique_ptr<Transfer>> active;  // in the multi handle
    std::vector<std::unique_ptr<Transfer>> idle;    // at most as many as were in flight at once
    // The own client's (declared after the transfers: a transfer's connection goes first).
    std::vector<std::unique_ptr<PlainConnection>> connections;  // by PlainConnection::index
    std::vector<PlainConnection*> idle_connections;             // kept for the next request
    std::deque<Transfer*> waiting;                              // in `active`, for a connection
    std::optional<std::chrono::steady_clock::time_point> next_deadline;  // of a request
    std::array<char, 65536> read_buffer{};
  };

  struct Shard {
    std::shared_ptr<State> state;
    std::thread thread;
  };
  std::vector<Shard> shards_;  // the threads are started once every state is complete
};

}  // namespace

std::string header_value(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_header_value(out, text);
  return out;
}

bool is_json_media_type(std::string_view content_type) {
  std::string_view type = trim_http_space(content_type.substr(0, content_type.find(';')));
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

int default_http_transfer_threads() {
  constexpr unsigned kCoresPerThread = 4;
  constexpr unsigned kMaxThreads = 4;
  return static_cast<int>(
      std::clamp(std::thread::hardware_concurrency() / kCoresPerThread, 1U, kMaxThreads));
}

Handler make_http_handler(const HandlerConfig& config, std::size_t max_result_bytes,
                          int concurrency, int transfer_threads) {
  curl_library();  // a library that cannot be loaded stops the start, not every job
  const Millis timeout = config.timeout.count() > 0 ? config.timeout : kDefaultTimeout;
  auto transfers = std::make_shared<TransferThreads>(
      config.http_url, timeout,
      std::max(kMaxBodyKept, max_result_bytes == 0 ? 0 : max_result_bytes + 1),
      static_cast<long>(std::max(concurrency, 1)),
      transfer_threads > 0 ? transfer_threads : default_http_transfer_threads());
  return AsyncHandler([transfers](const Job& job, std::stop_token stop, HandlerDone done) {
    transfers->start(job, std::move(stop), std::move(done));
  });
}

}  // namespace pgjobd
