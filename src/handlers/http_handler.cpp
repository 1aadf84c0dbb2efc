// The http handler: POSTs a job's payload with libcurl and maps the response to a JobResult.
#include "handlers/http_handler.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <ctime>
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
#include "handlers/unique_fd.hpp"
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
    for (long i = 0; i < count; ++i) {
      const long share = max_connections / count + (i < max_connections % count ? 1 : 0);
      shards_.push_back(Shard{std::make_shared<State>(url, timeout, body_bytes, share), {}});
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
    State(std::string url_in, Millis timeout_in, std::size_t body_bytes_in, long max_connections_in)
        : url(std::move(url_in)),
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
          const int fd = events[static_cast<std::size_t>(i)].data.fd;
          const std::uint32_t what = events[static_cast<std::size_t>(i)].events;
          if (fd == wake.get()) {
            std::uint64_t count = 0;
            [[maybe_unused]] const ssize_t ignored = ::read(fd, &count, sizeof count);
            continue;
          }
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
      if (!timer_due) return kPollMillis;
      const auto left = *timer_due - std::chrono::steady_clock::now();
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

    // A transfer of an earlier request when there is one (its handle's options, set once,
    // still point at it), else a new one.
    std::unique_ptr<Transfer> prepare(Request& request) {
      const CurlLibrary& curl = curl_library();
      std::unique_ptr<Transfer> transfer;
      if (!idle.empty()) {
        transfer = std::move(idle.back());
        idle.pop_back();
      } else {
        transfer = std::make_unique<Transfer>(body_bytes);
        transfer->handle.reset(curl.easy_init());
        if (!transfer->handle) throw std::runtime_error("curl_easy_init failed");
        CURL* handle = transfer->handle.get();
        curl.easy_setopt(handle, CURLOPT_URL, url.c_str());
        // The payload must never go to file://, ldap:// or the like. Redirects are not
        // followed.
        curl.easy_setopt(handle, CURLOPT_PROTOCOLS_STR, "http,https");
        curl.easy_setopt(handle, CURLOPT_HTTPHEADER, transfer->header_nodes.data());
        curl.easy_setopt(handle, CURLOPT_POST, 1L);
        curl.easy_setopt(handle, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
        curl.easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);  // signals are process-wide
        curl.easy_setopt(handle, CURLOPT_ERRORBUFFER, transfer->error_text);
        curl.easy_setopt(handle, CURLOPT_HEADERFUNCTION, &on_header);
        curl.easy_setopt(handle, CURLOPT_HEADERDATA, transfer.get());
        curl.easy_setopt(handle, CURLOPT_WRITEFUNCTION, &on_body);
        curl.easy_setopt(handle, CURLOPT_WRITEDATA, transfer.get());
        curl.easy_setopt(handle, CURLOPT_PRIVATE, transfer.get());
        curl.easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, &on_open);
        curl.easy_setopt(handle, CURLOPT_OPENSOCKETDATA, this);
        curl.easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, &on_close);
        curl.easy_setopt(handle, CURLOPT_CLOSESOCKETDATA, this);
      }
      const Job& job = *request.job;
      transfer->set_headers(job);
      CURL* handle = transfer->handle.get();
      curl.easy_setopt(handle, CURLOPT_POSTFIELDS, job.payload.data());
      curl.easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(job.payload.size()));
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
      curl_library().multi_remove_handle(multi.get(), transfer->handle.get());
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

   public:
    const std::string url;
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
