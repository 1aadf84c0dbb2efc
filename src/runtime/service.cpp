// ServiceThread: a std::jthread behind the start/stop contract.

#include "runtime/service.hpp"

#include <stdexcept>

namespace pgjobd {

void ServiceThread::start(std::function<void(std::stop_token)> body) {
  std::lock_guard lock(mutex_);
  if (started_) throw std::logic_error("service started twice");
  started_ = true;
  if (stop_.stop_requested()) return;  // stopped before it started: it never runs
  thread_ = std::jthread(std::move(body));
  stop_ = thread_.get_stop_source();
}

void ServiceThread::request_stop() {
  std::lock_guard lock(mutex_);
  stop_.request_stop();
}

void ServiceThread::join() {
  std::jthread thread;
  {
    // Moved out so that join() may run while another thread calls request_stop(), which
    // reaches the body through stop_.
    std::lock_guard lock(mutex_);
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
}

}  // namespace pgjobd
