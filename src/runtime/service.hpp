#pragma once
// The start/stop contract of every part that owns threads (the engine's, the scheduler, the
// systemd watchdog):
//   start()         launches them (never a constructor: a test wires a part up first);
//   request_stop()  asks them to finish and returns at once;
//   join()          waits until they have;
//   stop()          both.
// Each is safe to call twice, and stop() before start() is a no-op. The engine starts its
// parts in dependency order and stops them in the reverse order.

#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

namespace pgjobd {

class Service {
 public:
  virtual ~Service() = default;
  virtual void start() = 0;
  virtual void request_stop() = 0;
  virtual void join() = 0;
  void stop() {
    request_stop();
    join();
  }
};

// One thread under that contract. The body gets a stop_token, which also interrupts
// std::condition_variable_any waits that are given it. Declare it as the last member of
// its owner: it is joined before the members its body uses are destroyed.
class ServiceThread {
 public:
  ServiceThread() = default;
  ~ServiceThread() { stop(); }
  ServiceThread(const ServiceThread&) = delete;
  ServiceThread& operator=(const ServiceThread&) = delete;

  // Throws std::logic_error when already started.
  void start(std::function<void(std::stop_token)> body);
  void request_stop();
  void join();
  void stop() {
    request_stop();
    join();
  }

 private:
  std::mutex mutex_;       // guards the members below: any thread may stop the service
  std::stop_source stop_;  // the thread's, once started
  std::jthread thread_;
  bool started_ = false;
};

}  // namespace pgjobd
