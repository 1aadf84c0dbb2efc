#pragma once
// Who is asking: password checks against crypt(3) hashes (libxcrypt) and the sessions a
// login opens. Sessions live in memory only: a restart logs everyone out, which is cheaper
// than a sessions table and costs an operator one login.

#include <chrono>
#include <condition_variable>
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
  // The user's password hash when the session began ("" without logins): a session is
  // honoured only while the configured hash is still this one, so a password change or a
  // removed user ends every session made with the old password.
  std::string password_hash;
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
  Session create(const std::string& user, std::chrono::milliseconds ttl,
                 const std::string& password_hash = "");
  // The session with this id if it has not expired (a copy: the table may change meanwhile).
  std::optional<Session> find(std::string_view id);
  void erase(std::string_view id);
  // Ends every session whose user's hash is no longer `hash_of(user)` ("" for a user gone).
  template <typename HashOf>
  void erase_stale(HashOf hash_of) {
    std::lock_guard lock(mutex_);
    std::erase_if(sessions_, [&](const auto& entry) {
      return entry.second.password_hash != hash_of(entry.second.user);
    });
  }
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

// Failed logins, counted per client address and per user name, so that guessing one
// user's password stays slow however the guesser interleaves logins of its own: a success
// resets no count (a reset is something a guesser with any account of its own can trigger,
// and counts end with their window anyway). An address may fail kMaxFailuresPerAddress
// times within kWindow, a user name kMaxFailuresPerUser times from all addresses together;
// beyond either, logins from that address or for that name wait until its window has
// passed. IPv6 addresses count by their /64, which one host usually holds whole. Both tables
// hold at most kMaxEntries records (under 300 bytes each, 2.4 MB in all): when one is full, a
// record whose window has passed makes room, else the oldest; the names of configured users are
// never evicted by unknown ones, so a flood of made-up names cannot clear a real user's count.
// Unknown names are counted like real ones, so a 429 does not tell which names exist.
class LoginThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kMaxFailuresPerAddress = 10;
  static constexpr int kMaxFailuresPerUser = 30;
  static constexpr std::chrono::minutes kWindow{5};
  static constexpr std::size_t kMaxEntries = 4096;
  // A name counts by its first this many bytes: a login form may carry 64 KB of name.
  static constexpr std::size_t kMaxNameBytes = 128;

  bool allowed(const std::string& address, const std::string& user);
  // `known_user`: `user` is a configured user (its record is kept over unknown names').
  void failed(const std::string& address, const std::string& user, bool known_user);

  // Records held, in both tables.
  std::size_t size();

  // The key an address counts under: IPv6 by its /64, anything else as it is.
  static std::string address_key(const std::string& address);

 private:
  struct Record {
    int failures = 0;
    Clock::time_point window_start;
    bool pinned = false;  // never evicted for an unpinned record
  };
  class Table {
   public:
    bool below(const std::string& key, int limit, Clock::time_point now);
    void add(const std::string& key, bool pinned, Clock::time_point now);
    std::size_t size() const { return records_.size(); }

   private:
    std::map<std::string, Record, std::less<>> records_;
  };
  std::mutex mutex_;
  Table addresses_;
  Table users_;
};

// At most one password check at a time and one waiting: a check costs yescrypt's memory
// (16 MiB) and a core for tens of milliseconds, so a flood of logins from many addresses
// would otherwise take every server thread and that memory once per thread. A login that
// finds both places taken is refused at once (429), without a check.
class PasswordGate {
 public:
  // False when busy; true means the caller holds the gate until leave().
  bool enter();
  void leave();

 private:
  std::mutex mutex_;
  std::condition_variable free_;
  bool running_ = false;
  bool waiting_ = false;
};

}  // namespace pgjobd::ui
