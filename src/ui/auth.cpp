// Passwords (libxcrypt) and in-memory sessions.
#include "ui/auth.hpp"

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

namespace pgjobd::ui {
namespace {

// strerror is not thread-safe; the error_code message is.
std::string error_text(int error_number) {
  return std::error_code(error_number, std::generic_category()).message();
}

}  // namespace

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
    throw std::runtime_error(std::string("crypt_gensalt_rn: ") + error_text(errno));
  }
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const char* out = crypt_rn(password.c_str(), salt, data.get(), sizeof(crypt_data));
  if (out == nullptr || out[0] == '*') {
    throw std::runtime_error(std::string("crypt_rn: ") + error_text(errno));
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
      throw std::runtime_error(std::string("getrandom: ") + error_text(errno));
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

Session SessionTable::create(const std::string& user, std::chrono::milliseconds ttl) {
  Session session;
  session.id = random_hex(32);
  session.csrf = random_hex(32);
  session.user = user;
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

bool LoginThrottle::allowed(const std::string& address) {
  std::lock_guard lock(mutex_);
  auto found = records_.find(address);
  if (found == records_.end()) return true;
  if (Clock::now() - found->second.window_start >= kWindow) {
    records_.erase(found);
    return true;
  }
  return found->second.failures < kMaxFailures;
}

void LoginThrottle::failed(const std::string& address) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mutex_);
  // Old windows go first, so that a scan of many addresses cannot grow the map for ever.
  if (records_.size() >= 10000) {
    std::erase_if(records_,
                  [&](const auto& entry) { return now - entry.second.window_start >= kWindow; });
    if (records_.size() >= 10000) records_.clear();
  }
  Record& record = records_[address];
  if (record.failures == 0 || now - record.window_start >= kWindow) {
    record.failures = 0;
    record.window_start = now;
  }
  ++record.failures;
}

void LoginThrottle::succeeded(const std::string& address) {
  std::lock_guard lock(mutex_);
  records_.erase(address);
}

}  // namespace pgjobd::ui
