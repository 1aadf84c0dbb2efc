// Passwords (libxcrypt) and in-memory sessions.
#include "ui/auth.hpp"

#include <arpa/inet.h>
#include <crypt.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include "text/errno_text.hpp"

namespace pgjobd::ui {

bool constant_time_equals(std::string_view a, std::string_view b) {
  // The length is no secret (every hash of one method has the same length); the bytes are.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

bool verify_password(const std::string& hash, const std::string& password) {
  // crypt_data is large (~32 KB): on the heap, not on a civetweb thread's stack.
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* out = crypt_rn(password.c_str(), hash.c_str(), data.get(), sizeof(crypt_data));
  // crypt_rn returns NULL (or a string starting with '*') for an unusable hash: no match.
  const bool ok = out != nullptr && out[0] != '*' && constant_time_equals(out, hash);
  // The buffer held the password and its hash.
  explicit_bzero(data.get(), sizeof(crypt_data));
  return ok;
}

std::string hash_password(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  // NULL random bytes: libxcrypt draws them from the OS itself. 0: its default cost.
  if (crypt_gensalt_rn("$y$", 0, nullptr, 0, salt, sizeof salt) == nullptr) {
    throw std::runtime_error(std::string("crypt_gensalt_rn: ") + errno_text(errno));
  }
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* out = crypt_rn(password.c_str(), salt, data.get(), sizeof(crypt_data));
  if (out == nullptr || out[0] == '*') {
    throw std::runtime_error(std::string("crypt_rn: ") + errno_text(errno));
  }
  std::string hash = out;
  explicit_bzero(data.get(), sizeof(crypt_data));
  return hash;
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  std::size_t filled = 0;
  while (filled < bytes) {
    const ssize_t got = getrandom(buffer.data() + filled, bytes - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom: ") + errno_text(errno));
    }
    filled += static_cast<std::size_t>(got);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (const unsigned char b : buffer) {
    out += kHex[b >> 4];
    out += kHex[b & 0xF];
  }
  return out;
}

void SessionTable::drop_expired(Clock::time_point now) {
  std::erase_if(sessions_, [&](const auto& entry) { return entry.second.expires <= now; });
}

Session SessionTable::create(const std::string& user, std::chrono::milliseconds ttl,
                             const std::string& password_hash) {
  Session session;
  session.id = random_hex(32);
  session.csrf = random_hex(32);
  session.user = user;
  session.password_hash = password_hash;
  const Clock::time_point now = Clock::now();
  session.expires = now + ttl;
  std::lock_guard lock(mutex_);
  drop_expired(now);
  if (sessions_.size() >= max_sessions_ && !sessions_.empty()) {
    auto oldest = std::min_element(sessions_.begin(), sessions_.end(), [](auto& a, auto& b) {
      return a.second.expires < b.second.expires;
    });
    sessions_.erase(oldest);
  }
  sessions_[session.id] = session;
  return session;
}

std::optional<Session> SessionTable::find(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto found = sessions_.find(id);
  if (found == sessions_.end()) return std::nullopt;
  if (found->second.expires <= Clock::now()) {
    sessions_.erase(found);
    return std::nullopt;
  }
  return found->second;
}

void SessionTable::erase(std::string_view id) {
  std::lock_guard lock(mutex_);
  if (auto found = sessions_.find(id); found != sessions_.end()) sessions_.erase(found);
}

void SessionTable::set_flash(std::string_view id, std::string message) {
  std::lock_guard lock(mutex_);
  if (auto found = sessions_.find(id); found != sessions_.end()) {
    found->second.flash = std::move(message);
  }
}

std::string SessionTable::take_flash(std::string_view id) {
  std::lock_guard lock(mutex_);
  auto found = sessions_.find(id);
  if (found == sessions_.end()) return {};
  return std::exchange(found->second.flash, std::string());
}

std::size_t SessionTable::size() {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

std::string LoginThrottle::address_key(const std::string& address) {
  in6_addr v6{};
  if (inet_pton(AF_INET6, address.c_str(), &v6) != 1) return address;
  std::fill(v6.s6_addr + 8, v6.s6_addr + 16, 0);
  char text[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, &v6, text, sizeof text) == nullptr) return address;
  return std::string(text) + "/64";
}

bool LoginThrottle::Table::below(const std::string& key, int limit, Clock::time_point now) {
  auto found = records_.find(key);
  if (found == records_.end()) return true;
  if (now - found->second.window_start >= kWindow) {
    records_.erase(found);
    return true;
  }
  return found->second.failures < limit;
}

void LoginThrottle::Table::add(const std::string& key, bool pinned, Clock::time_point now) {
  auto found = records_.find(key);
  if (found == records_.end()) {
    if (records_.size() >= kMaxEntries) {
      std::erase_if(records_,
                    [&](const auto& entry) { return now - entry.second.window_start >= kWindow; });
    }
    if (records_.size() >= kMaxEntries) {
      // The oldest window among those this record may evict; none: it is not counted.
      auto oldest = records_.end();
      for (auto it = records_.begin(); it != records_.end(); ++it) {
        if (it->second.pinned && !pinned) continue;
        if (oldest == records_.end() || it->second.window_start < oldest->second.window_start) {
          oldest = it;
        }
      }
      if (oldest == records_.end()) return;
      records_.erase(oldest);
    }
    found = records_.emplace(key, Record{0, now, pinned}).first;
  }
  Record& record = found->second;
  if (now - record.window_start >= kWindow) record = Record{0, now, pinned};
  record.pinned = record.pinned || pinned;
  ++record.failures;
}

bool LoginThrottle::allowed(const std::string& address, const std::string& user) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mutex_);
  const bool address_ok = addresses_.below(address_key(address), kMaxFailuresPerAddress, now);
  const bool user_ok = users_.below(user.substr(0, kMaxNameBytes), kMaxFailuresPerUser, now);
  return address_ok && user_ok;
}

void LoginThrottle::failed(const std::string& address, const std::string& user, bool known_user) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mutex_);
  addresses_.add(address_key(address), false, now);
  users_.add(user.substr(0, kMaxNameBytes), known_user, now);
}

std::size_t LoginThrottle::size() {
  std::lock_guard lock(mutex_);
  return addresses_.size() + users_.size();
}

bool PasswordGate::enter() {
  std::unique_lock lock(mutex_);
  if (!running_) {
    running_ = true;
    return true;
  }
  if (waiting_) return false;
  waiting_ = true;
  free_.wait(lock, [&] { return !running_; });
  waiting_ = false;
  running_ = true;
  return true;
}

void PasswordGate::leave() {
  {
    std::lock_guard lock(mutex_);
    running_ = false;
  }
  free_.notify_one();
}

}  // namespace pgjobd::ui
