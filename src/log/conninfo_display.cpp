// Showing a conninfo by its parsed fields (see conninfo_display.hpp).

#include "log/conninfo_display.hpp"

#include <libpq-fe.h>

#include <cctype>
#include <memory>
#include <set>

#include "log/secrets.hpp"

namespace pgjobd {
namespace {

struct OptionsDeleter {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};
using Options = std::unique_ptr<PQconninfoOption, OptionsDeleter>;

struct ErrorDeleter {
  void operator()(char* message) const { PQfreemem(message); }
};

const std::set<std::string, std::less<>>& connection_keywords() {
  static const std::set<std::string, std::less<>> keywords = [] {
    std::set<std::string, std::less<>> out;
    const Options defaults(PQconndefaults());
    for (const PQconninfoOption* o = defaults.get(); o != nullptr && o->keyword != nullptr; ++o) {
      out.emplace(o->keyword);
    }
    return out;
  }();
  return keywords;
}

// libpq's message with each "quoted" fragment that is not a keyword replaced by "…".
std::string without_quoted_fragments(std::string_view message) {
  std::string out;
  std::size_t pos = 0;
  while (pos < message.size()) {
    const std::size_t open = message.find('"', pos);
    const std::size_t close = open == std::string_view::npos ? open : message.find('"', open + 1);
    if (close == std::string_view::npos) {
      // An unmatched quote: whatever follows it could be the text itself.
      out.append(message.substr(pos, open == std::string_view::npos ? open : open - pos));
      if (open != std::string_view::npos) out += "\"…";
      break;
    }
    const std::string_view fragment = message.substr(open + 1, close - open - 1);
    out.append(message.substr(pos, open - pos));
    out += '"';
    // Kept: a keyword, or one delimiter (missing "=" after "password").
    const bool keep =
        connection_keywords().contains(fragment) ||
        (fragment.size() == 1 && std::ispunct(static_cast<unsigned char>(fragment[0])));
    out += keep ? fragment : std::string_view("…");
    out += '"';
    pos = close + 1;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

Options parse(std::string_view conninfo, std::string* error) {
  char* message = nullptr;
  Options options(PQconninfoParse(std::string(conninfo).c_str(), &message));
  const std::unique_ptr<char, ErrorDeleter> owned(message);
  if (!options && error != nullptr) {
    *error = message != nullptr ? without_quoted_fragments(message) : "out of memory";
  }
  return options;
}

}  // namespace

std::string describe_conninfo(std::string_view conninfo) {
  std::string error;
  const Options options = parse(conninfo, &error);
  std::string text;
  if (!options) {
    text = "a malformed conninfo (libpq: " + error + ")";
  } else {
    for (const char* key : {"host", "port", "dbname", "user"}) {
      for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
        if (std::string_view(o->keyword) == key && o->val != nullptr && *o->val != '\0') {
          text += (text.empty() ? "" : " ") + std::string(key) + "=" + o->val;
        }
      }
    }
    if (text.empty()) text = "libpq defaults";
  }
  // The fields shown are not the password, but a value quoted oddly can carry it along.
  return scrub_process_secrets(scrub_secrets(text, conninfo_password_candidates(conninfo)));
}

bool conninfo_parses(std::string_view conninfo) { return parse(conninfo, nullptr) != nullptr; }

}  // namespace pgjobd
