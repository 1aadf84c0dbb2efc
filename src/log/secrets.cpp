// Password candidates of a conninfo and scrubbing them from text (see secrets.hpp).

#include "log/secrets.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "text/percent.hpp"

namespace pgjobd {
namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

class Candidates {
 public:
  Candidates(std::string_view conninfo, bool with_pieces)
      : text_(conninfo), hidden_(conninfo.size(), false), with_pieces_(with_pieces) {}

  // Adds the conninfo's text at [pos, pos + length) and marks it as the password's place.
  void add_span(std::size_t pos, std::size_t length) {
    length = std::min(length, text_.size() - pos);
    std::fill_n(hidden_.begin() + static_cast<std::ptrdiff_t>(pos), length, true);
    add(text_.substr(pos, length));
  }
  // Adds `raw`, its percent-decoded form and the pieces of both between the characters
  // libpq splits a URL on: a message about a malformed URL can quote such a piece (the
  // "port" of "postgresql://u:pa/ss@h" is "pa", cut at the '/').
  void add(std::string_view raw) {
    add_one(raw);
    const std::string decoded = percent_decode(raw);
    add_one(decoded);
    if (!with_pieces_) return;
    for (const std::string_view text : {raw, std::string_view(decoded)}) {
      std::size_t start = 0;
      while (start <= text.size()) {
        const std::size_t end = text.find_first_of("/?#@&=,:[]", start);
        add_one(text.substr(start, end == std::string_view::npos ? end : end - start));
        if (end == std::string_view::npos) break;
        start = end + 1;
      }
    }
  }
  // The candidates, less any that is also a visible part of the conninfo (its user name,
  // host or database name, as in a demo's postgresql://pgjobd:pgjobd@db/pgjobd): those are
  // shown wherever the masked conninfo is, so scrubbing them could hide nothing, and it
  // would garble every line that mentions them.
  std::vector<std::string> take() {
    std::string visible(text_);
    for (std::size_t i = 0; i < visible.size(); ++i) {
      if (hidden_[i]) visible[i] = ' ';
    }
    std::vector<std::string_view> tokens;
    std::size_t start = 0;
    const std::string_view view(visible);
    while (start < view.size()) {
      const std::size_t end = view.find_first_of(kTokenDelimiters, start);
      if (end != start) tokens.push_back(view.substr(start, end - start));
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
    std::erase_if(list_, [&tokens](const std::string& candidate) {
      return std::find(tokens.begin(), tokens.end(), candidate) != tokens.end();
    });
    return std::move(list_);
  }

 private:
  void add_one(std::string_view text) {
    if (text.size() < kMinScrubbedSecretLength) return;
    if (std::find(list_.begin(), list_.end(), text) == list_.end()) list_.emplace_back(text);
  }
  static constexpr std::string_view kTokenDelimiters = " \t\r\n/?#@&=,:[]'\"";
  std::string_view text_;
  std::vector<bool> hidden_;
  bool with_pieces_;
  std::vector<std::string> list_;
};

// URL userinfo: after "scheme://user:" up to the first '@' (what libpq reads) and up to
// the last '@' (what the operator meant when the password holds an unencoded '@').
void add_url_userinfo(std::string_view text, Candidates& out) {
  for (std::size_t pos = text.find("://"); pos != std::string_view::npos;
       pos = text.find("://", pos + 3)) {
    const std::size_t after = pos + 3;
    const std::size_t colon = text.find(':', after);
    const std::size_t first_at = text.find('@', after);
    const std::size_t last_at = text.rfind('@');
    // The colon must end the user name: before the first '@', with no '/' before it.
    if (colon == std::string_view::npos || first_at == std::string_view::npos || colon > first_at ||
        text.substr(after, colon - after).find('/') != std::string_view::npos) {
      continue;
    }
    // "host:5432/db?x=a@b" is a port and a path, not a password with a '/' in it.
    const std::size_t slash = text.find('/', colon);
    if (slash < first_at) {
      const std::string_view port = text.substr(colon + 1, slash - colon - 1);
      if (std::all_of(port.begin(), port.end(),
                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
        continue;
      }
    }
    out.add_span(colon + 1, first_at - colon - 1);
    out.add_span(colon + 1, last_at - colon - 1);
  }
}

// `password = value` anywhere: a key=value entry (value quoted with backslash escapes, or
// bare up to whitespace) or a URL query parameter (up to '&' or '#').
void add_password_values(std::string_view text, Candidates& out) {
  static constexpr std::string_view kKey = "password";
  for (std::size_t pos = 0; pos + kKey.size() <= text.size(); ++pos) {
    bool match = true;
    for (std::size_t k = 0; k < kKey.size() && match; ++k) {
      match = std::tolower(static_cast<unsigned char>(text[pos + k])) == kKey[k];
    }
    if (!match) continue;
    // In a URL query the value ends at '&' or '#'; in key=value text, at whitespace.
    const bool in_query = pos > 0 && (text[pos - 1] == '?' || text[pos - 1] == '&');
    std::size_t i = pos + kKey.size();
    while (i < text.size() && is_space(text[i])) ++i;
    if (i >= text.size() || text[i] != '=') continue;
    ++i;
    while (i < text.size() && is_space(text[i])) ++i;
    if (in_query) {
      const std::size_t end = text.find_first_of("&#", i);
      out.add_span(i, end == std::string_view::npos ? text.size() - i : end - i);
    } else if (i < text.size() && text[i] == '\'') {
      // Quoted: up to the closing quote, or the end when it is unterminated.
      std::string unescaped;
      const std::size_t start = ++i;
      while (i < text.size() && text[i] != '\'') {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        unescaped += text[i++];
      }
      out.add_span(start, i - start);
      out.add(unescaped);
    } else {
      std::string unescaped;
      const std::size_t start = i;
      while (i < text.size() && !is_space(text[i])) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        unescaped += text[i++];
      }
      out.add_span(start, i - start);
      out.add(unescaped);
      // An operator who forgot the quotes around "pass word" meant the words that follow,
      // up to the next key=value entry; libpq's "missing \"=\" after \"word\"" quotes them.
      std::size_t span_end = i;
      while (span_end < text.size()) {
        std::size_t word = span_end;
        while (word < text.size() && is_space(text[word])) ++word;
        std::size_t word_end = word;
        while (word_end < text.size() && !is_space(text[word_end])) ++word_end;
        const std::string_view next = text.substr(word, word_end - word);
        if (next.empty() || next.find('=') != std::string_view::npos) break;
        out.add_span(word, word_end - word);
        span_end = word_end;
      }
      if (span_end > i) out.add_span(start, span_end - start);
    }
  }
}

struct ProcessSecrets {
  std::mutex mutex;
  // Replaced, never changed in place: a reader scrubs with its own snapshot, unlocked.
  std::shared_ptr<const std::vector<std::string>> secrets =
      std::make_shared<const std::vector<std::string>>();
};

ProcessSecrets& process_secrets() {
  static ProcessSecrets instance;
  return instance;
}

}  // namespace

std::vector<std::string> conninfo_passwords(std::string_view conninfo) {
  Candidates candidates(conninfo, false);
  add_url_userinfo(conninfo, candidates);
  add_password_values(conninfo, candidates);
  return candidates.take();
}

std::vector<std::string> conninfo_password_candidates(std::string_view conninfo) {
  Candidates candidates(conninfo, true);
  add_url_userinfo(conninfo, candidates);
  add_password_values(conninfo, candidates);
  return candidates.take();
}

std::string scrub_secrets(std::string_view text, const std::vector<std::string>& secrets) {
  std::string out(text);
  std::vector<const std::string*> by_length;
  by_length.reserve(secrets.size());
  for (const std::string& secret : secrets) {
    if (!secret.empty()) by_length.push_back(&secret);
  }
  std::sort(by_length.begin(), by_length.end(),
            [](const std::string* a, const std::string* b) { return a->size() > b->size(); });
  for (const std::string* secret : by_length) {
    for (std::size_t pos = out.find(*secret); pos != std::string::npos;
         pos = out.find(*secret, pos + 3)) {
      out.replace(pos, secret->size(), "***");
    }
  }
  return out;
}

void add_process_secrets(const std::vector<std::string>& secrets) {
  ProcessSecrets& process = process_secrets();
  std::lock_guard lock(process.mutex);
  auto next = std::make_shared<std::vector<std::string>>(*process.secrets);
  for (const std::string& secret : secrets) {
    if (secret.size() >= kMinScrubbedSecretLength &&
        std::find(next->begin(), next->end(), secret) == next->end()) {
      next->push_back(secret);
    }
  }
  process.secrets = std::move(next);
}

void add_database_secrets(std::string_view conninfo) {
  std::vector<std::string> secrets = conninfo_password_candidates(conninfo);
  // libpq falls back to PGPASSWORD when the conninfo has no password.
  if (const char* pgpassword = std::getenv("PGPASSWORD"); pgpassword != nullptr) {
    secrets.emplace_back(pgpassword);
  }
  add_process_secrets(secrets);
}

std::string scrub_process_secrets(std::string_view text) {
  std::shared_ptr<const std::vector<std::string>> secrets;
  {
    ProcessSecrets& process = process_secrets();
    std::lock_guard lock(process.mutex);
    secrets = process.secrets;
  }
  if (secrets->empty()) return std::string(text);
  return scrub_secrets(text, *secrets);
}

}  // namespace pgjobd
