#pragma once
// Who is asking: password checks against crypt(3) hashes (libxcrypt) and the sessions a
// login opens. Sessions live in memory only: a restart logs everyone out, which is cheaper
// than a sessions table and costs an operator one login.

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace pgjobd::ui {

enum class Role { kOperator, kReadOnly };

// True when `password` hashes to `hash` (any method libxcrypt knows: yescrypt, bcrypt,
// sha512crypt, ...). The final comparison takes the same time wherever the strings differ.
bool verify_password(const std::string& hash, const std::string& password);

// A new yescrypt hash of `password` ("$y$..."), with a random salt from the OS.
// Throws std::runtime_error when libxcrypt cannot make one.
std::string hash_password(const std::string& password);

// Compares without an early exit, so the time taken does not tell how much matched.
bool constant_time_equals(std::string_view a, std::string_view b);

// `bytes` random bytes from the kernel's CSPRNG (getrandom), as lowercase hex.
// Throws std::runtime_error if the kernel cannot supply them.
std::string random_hex(std::size_t bytes);

struct Session {
  std::string id;    // the cookie's value
  std::string csrf;  // the token every form of this session carries
  std::string user;
  std::chrono::steady_clock::time_point expires;
  std::string flash;  // a message for the next page shown, then cleared
};

// Open sessions by id. Thread-safe: civetweb serves requests on several threads.
class SessionTable {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SessionTable(std::size_t max_sessions = 10000) : max_sessions_(max_sessions) {}

  // A new session for `user` lasting `ttl`. When the table is full the session closest to
  // expiring makes room, so a flood of logins cannot exhaust memory.
  Session create(const std::string& user, std::chrono::milliseconds ttl);
  // The session with this id if it has not expired (a copy: the table may change meanwhile).
  std::optional<Session> find(std::string_view id);
  void erase(std::string_view id);
  // Sets the message the session's next page shows.
  void set_flash(std::string_view id, std::string message);
  // Returns and clears the session's message.
  std::string take_flash(std::string_view id);
  std::size_t size();

 private:
  void drop_expired(Clock::time_point now);

  std::mutex mutex_;
  std::map<std::string, Session, std::less<>> sessions_;
  std::size_t max_sessions_;
};

// Failed logins per client address: after kMaxFailures within kWindow, that address may
// not try again until the window has passed. Bounds password guessing to a few tries a
// minute instead of what yescrypt's cost alone allows. Behind a proxy every client shares
// the proxy's address, so one guesser there locks everyone out for a while: the safer side.
class LoginThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kMaxFailures = 10;
  static constexpr std::chrono::minutes kWindow{5};

  bool allowed(const std::string& address);
  void failed(const std::string& address);
  void succeeded(const std::string& address);

 private:
  struct Record {
    int failures = 0;
    Clock::time_point window_start;
  };
  std::mutex mutex_;
  std::map<std::string, Record> records_;
};

}  // namespace pgjobd::ui
