// Collects config problems, orders them by line, and suggests the key that was probably meant.
#include "config/diagnostics.hpp"

#include <algorithm>
#include <limits>

#include "pgjobd/config.hpp"
#include "text/escape.hpp"

namespace pgjobd::config_detail {
namespace {

// True when `inner` is `outer` or a key nested in it ("a.b" is in "a"; "a.b[0]" is in "a.b").
bool is_within(std::string_view inner, std::string_view outer) {
  if (!inner.starts_with(outer)) return false;
  if (inner.size() == outer.size()) return true;
  char next = inner[outer.size()];
  return next == '.' || next == '[';
}

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
// neighbours all cost one, so "concurency" and "tiemout" are both one edit away.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

void Diagnostics::note_line(const std::string& key, int line) {
  if (line > 0) lines_[key] = line;
}

int Diagnostics::line_of(const std::string& key) const {
  auto it = lines_.find(key);
  return it == lines_.end() ? 0 : it->second;
}

void Diagnostics::add(int line, const std::string& key, const std::string& what) {
  problems_.push_back({line, key, what});
}

bool Diagnostics::reported(const std::string& key) const {
  return std::any_of(problems_.begin(), problems_.end(), [&](const Problem& problem) {
    return !problem.key.empty() && (is_within(key, problem.key) || is_within(problem.key, key));
  });
}

void Diagnostics::throw_if_any() const {
  if (problems_.empty()) return;
  std::vector<Problem> sorted = problems_;
  // Like a compiler: in file order; problems with no known line go last.
  auto order = [](int line) { return line > 0 ? line : std::numeric_limits<int>::max(); };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Problem& a, const Problem& b) {
    return order(a.line) < order(b.line);
  });
  std::vector<std::string> messages;
  for (const Problem& problem : sorted) {
    std::string message = source_name_;
    if (problem.line > 0) message += ":" + std::to_string(problem.line);
    message += ": ";
    if (!problem.key.empty()) message += problem.key + ": ";
    // A key or value quoted from the file may hold a newline or a NUL ("a\nb" is a valid
    // key): escaped, each problem stays one line and what() is not cut short.
    messages.push_back(escape_control_characters(message + problem.text));
  }
  throw ConfigError(std::move(messages));
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = 3;  // suggest only within two edits
  for (const std::string& candidate : candidates) {
    std::size_t distance = edit_distance(word, candidate);
    // Two edits turn any two-letter word into any other; don't suggest a whole new word.
    if (distance < best_distance && distance < candidate.size()) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace pgjobd::config_detail
