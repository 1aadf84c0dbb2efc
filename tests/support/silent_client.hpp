#pragma once
// Clients that connect to a listener on loopback and send a little, slowly, or nothing: a
// browser's idle or preconnected socket, a scraper whose request stalled, an attacker
// trickling headers a byte at a time. A civetweb worker waits on each for the rest of the
// request. Source addresses 127.0.0.2, 127.0.0.3, ... are loopback too, so many client
// addresses can be modelled on one machine.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace pgjobd::testing {

class SilentClient {
 public:
  // Connects from `source` (any 127.x.y.z; "" lets the kernel choose) to 127.0.0.1:port and
  // sends `text` (possibly nothing).
  SilentClient(int port, const std::string& text, const std::string& source = "");
  ~SilentClient();
  SilentClient(const SilentClient&) = delete;
  SilentClient& operator=(const SilentClient&) = delete;

  bool connected() const { return connected_; }
  // Whether the server closed the connection (or reset it) within `timeout`, anything it
  // sent first aside.
  bool closed_within(std::chrono::milliseconds timeout);
  // Sends `text` now; false when the connection no longer takes it.
  bool send_more(const std::string& text);

 private:
  int fd_;
  bool connected_ = false;
};

// `count` connections, client i from 127.0.0.(2 + i % addresses), each sending a request's
// headers one byte every `interval` and never finishing them; a connection the server closes
// is opened again. Runs until destroyed, and at most `max_run`.
class TricklingClients {
 public:
  TricklingClients(int port, int count, int addresses,
                   std::chrono::milliseconds interval = std::chrono::milliseconds(500),
                   std::chrono::seconds max_run = std::chrono::seconds(120));
  ~TricklingClients();
  TricklingClients(const TricklingClients&) = delete;
  TricklingClients& operator=(const TricklingClients&) = delete;

  int connections_opened() const { return opened_.load(); }
  // Connections open now, their first bytes sent.
  int connections_open() const { return open_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> opened_{0};
  std::atomic<int> open_{0};
  std::vector<std::thread> threads_;
};

// How many of `count` GETs of `path`, one every `spacing`, answered 200 within `within`.
struct TimedProbes {
  int within = 0;
  int count = 0;
  std::chrono::milliseconds slowest{0};
};
TimedProbes probe_timed(int port, const std::string& path, int count,
                        std::chrono::milliseconds spacing,
                        std::chrono::milliseconds within = std::chrono::milliseconds(1000));

// Sends `request` as it is from 127.0.0.1 and returns all the server sent until it closed
// the connection (at most `timeout`): status line, headers and body.
std::string raw_exchange(int port, const std::string& request,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

}  // namespace pgjobd::testing
