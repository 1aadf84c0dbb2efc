#include "http/listener_stop.hpp"

#include <civetweb.h>
#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http/listen_address.hpp"

namespace pgjobd {
namespace {

void knock(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  // Non-blocking: an address of this host completes the handshake within connect(), and
  // whatever else happens (a firewall dropping the SYN) must not hold up the stop.
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        found->ai_protocol);
  if (fd >= 0) {
    (void)connect(fd, found->ai_addr, found->ai_addrlen);
    close(fd);
  }
  freeaddrinfo(found);
}

// A real-time signal: nothing else in the process uses it, and none is ignored by default
// (an ignored signal would not interrupt the poll).
int wake_signal() { return SIGRTMIN + 3; }

void on_wake_signal(int /*signal*/) {}

using Clock = std::chrono::steady_clock;

// A worker that serves a connection now: its listener and connection, the client's address
// ("" until the watchdog has read it), and when the watchdog interrupts it (max: not before
// it ends the connection).
struct ServedConnection {
  const mg_context* context;
  const mg_connection* connection;
  pthread_t thread;
  std::string address;
  Clock::time_point deadline;
};

// The workers of every watched listener that serve a connection now. An entry is added and
// removed only by its own thread (see listener_stop.hpp).
class ServingWorkers {
 public:
  ServingWorkers() {
    // Detached and never destroyed (see serving_workers): it waits on this object's
    // members until the process exits.
    std::thread([this] { enforce_deadlines(); }).detach();
  }

  void list_this_thread(const mg_connection* connection) {
    std::lock_guard lock(mutex_);
    // An entry left by a connection whose connection_close civetweb skipped (CivetServer
    // skips ours for one closed before its constructor returns).
    forget_this_thread();
    threads_.push_back({mg_get_context(connection), connection, pthread_self(), "",
                        Clock::now() + kRequestReadDeadline});
    deadline_added_.notify_one();
  }
  void unlist_this_thread() {
    std::lock_guard lock(mutex_);
    forget_this_thread();
  }
  void clear_this_threads_deadline() {
    std::lock_guard lock(mutex_);
    const pthread_t self = pthread_self();
    for (auto& served : threads_) {
      if (pthread_equal(served.thread, self)) served.deadline = Clock::time_point::max();
    }
  }
  // Under the mutex: no listed thread can have unlisted itself and exited meanwhile.
  void signal(const mg_context* context) {
    std::lock_guard lock(mutex_);
    for (const auto& served : threads_) {
      if (served.context == context) pthread_kill(served.thread, wake_signal());
    }
  }

 private:
  void forget_this_thread() {  // with mutex_ held
    const pthread_t self = pthread_self();
    std::erase_if(threads_, [&](const auto& served) { return pthread_equal(served.thread, self); });
  }

  // civetweb has filled in the client's address before init_connection, but its
  // mg_get_request_info answers only once the connection is marked a request, right after
  // init_connection returns. The address cannot change while the entry is listed.
  // Under the mutex; true when the address is known.
  bool learn_address(ServedConnection& served, Clock::time_point now) {
    if (!served.address.empty()) return true;
    const mg_request_info* info = mg_get_request_info(served.connection);
    if (info == nullptr) return false;
    served.address = info->remote_addr;
    const auto held = std::count_if(threads_.begin(), threads_.end(), [&](const auto& other) {
      return &other != &served && other.context == served.context &&
             other.address == served.address;
    });
    if (held >= kConnectionsPerAddress) served.deadline = now;
    return true;
  }

  // The watchdog. A signal that lands while the worker is not in poll() (between two reads)
  // interrupts nothing, so an overdue worker is signalled every 10 ms until it unlists.
  [[noreturn]] void enforce_deadlines() {
    std::unique_lock lock(mutex_);
    while (true) {
      const Clock::time_point now = Clock::now();
      Clock::time_point next = Clock::time_point::max();
      for (auto& served : threads_) {
        if (!learn_address(served, now)) next = std::min(next, now + std::chrono::milliseconds(1));
        if (served.deadline <= now) {
          pthread_kill(served.thread, wake_signal());
          next = std::min(next, now + std::chrono::milliseconds(10));
        } else {
          next = std::min(next, served.deadline);
        }
      }
      if (next == Clock::time_point::max()) {
        deadline_added_.wait(lock);
      } else {
        deadline_added_.wait_until(lock, next);
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable deadline_added_;
  std::vector<ServedConnection> threads_;
};

ServingWorkers& serving_workers() {
  // Leaked on purpose: its watchdog thread uses it until the process ends.
  static auto* const workers = new ServingWorkers;
  return *workers;
}

thread_local const mg_context* started_here = nullptr;

void on_init_context(const mg_context* context) { started_here = context; }

int on_init_connection(const mg_connection* conn, void** /*conn_data*/) {
  // The thread that called mg_start may block it (the daemon blocks its own signals before
  // starting any thread); a worker only ever gets it from a stop or a deadline.
  sigset_t wake_only;
  sigemptyset(&wake_only);
  sigaddset(&wake_only, wake_signal());
  pthread_sigmask(SIG_UNBLOCK, &wake_only, nullptr);
  serving_workers().list_this_thread(conn);
  return 0;
}

void on_connection_close(const mg_connection* /*conn*/) { serving_workers().unlist_this_thread(); }

void on_exit_thread(const mg_context* /*context*/, int /*thread_type*/, void* /*pointer*/) {
  serving_workers().unlist_this_thread();
}

}  // namespace

void watch_workers(mg_callbacks& callbacks) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_handler = &on_wake_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(wake_signal(), &action, nullptr);
  });
  callbacks.init_context = &on_init_context;
  callbacks.init_connection = &on_init_connection;
  callbacks.connection_close = &on_connection_close;
  callbacks.exit_thread = &on_exit_thread;
}

const mg_context* context_started_here() { return started_here; }

std::string request_timeout_option() { return std::to_string(kRequestReadDeadline.count()); }

void request_read() { serving_workers().clear_this_threads_deadline(); }

std::string knock_address(const std::string& listen) {
  std::string host = listen_host(listen);
  if (host.empty() || host == "0.0.0.0" || host == "localhost") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

void stop_with_knocks(const std::string& host, int port, const mg_context* context,
                      const std::function<void()>& stop) {
  std::promise<void> stopped;
  std::future<void> done = stopped.get_future();
  std::thread stopper([&stop, &stopped] {
    stop();
    stopped.set_value();
  });
  while (done.wait_for(std::chrono::milliseconds(10)) == std::future_status::timeout) {
    knock(host, port);
    serving_workers().signal(context);
  }
  stopper.join();
}

}  // namespace pgjobd
