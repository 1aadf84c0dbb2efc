#pragma once
// A client that connects to a listener on loopback, sends a little or nothing, and then
// holds the connection without a word: a browser's idle or preconnected socket, a scraper
// whose request stalled. A civetweb worker waits on it for the rest of the request.

#include <string>

namespace pgjobd::testing {

class SilentClient {
 public:
  // Connects to 127.0.0.1:port and sends `text` (possibly nothing).
  SilentClient(int port, const std::string& text);
  ~SilentClient();
  SilentClient(const SilentClient&) = delete;
  SilentClient& operator=(const SilentClient&) = delete;

  bool connected() const { return connected_; }

 private:
  int fd_;
  bool connected_ = false;
};

}  // namespace pgjobd::testing
