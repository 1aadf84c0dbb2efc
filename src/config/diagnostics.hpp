#pragma once
// Collects config problems as "FILE:LINE: key: what" and remembers the line of each key.

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pgjobd::config_detail {

class Diagnostics {
 public:
  explicit Diagnostics(std::string source_name) : source_name_(std::move(source_name)) {}

  // Remembers the 1-based line where `key` was written, so later cross-field checks can
  // point at it too.
  void note_line(const std::string& key, int line);
  // 0 when unknown: the key kept its default, or the config was built in code.
  int line_of(const std::string& key) const;

  // Records a problem at a 1-based `line` (0 = unknown). An empty `key` means the whole file.
  void add(int line, const std::string& key, const std::string& what);
  // Records a problem at the line noted for `key`.
  void add(const std::string& key, const std::string& what) { add(line_of(key), key, what); }

  // True when a problem was already reported for `key`, for a key inside it or for a key
  // containing it. Later checks skip such keys so that one mistake is reported once.
  bool reported(const std::string& key) const;

  bool empty() const { return problems_.empty(); }
  // Throws ConfigError with every problem, in line order, if there is any.
  void throw_if_any() const;

 private:
  struct Problem {
    int line;
    std::string key;
    std::string text;
  };

  std::string source_name_;
  std::map<std::string, int> lines_;
  std::vector<Problem> problems_;
};

// The candidate closest to `word` within edit distance 2, or "" if none is that close.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace pgjobd::config_detail
