#pragma once
// Reads one YAML map of known keys into typed values, reporting unknown, duplicate and
// mistyped keys with their lines instead of stopping at the first.

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.hpp"
#include "pgjobd/duration.hpp"

namespace pgjobd::config_detail {

class YamlSection {
 public:
  struct Entry {
    std::string key;
    int key_line;  // 1-based
    YAML::Node value;
  };

  // `node` should be a map. Null counts as an empty map (a section whose keys are all
  // commented out); anything else is reported and the section reads as empty. `path` is the
  // dotted key ("" at the top level), `line` where it was written.
  YamlSection(const YAML::Node& node, std::string path, int line, Diagnostics& diag);

  const std::string& path() const { return path_; }
  int line() const { return line_; }
  bool present() const { return present_; }  // false for a key absent from the file
  bool is_map() const { return is_map_; }    // false when the node had the wrong type
  Diagnostics& diag() const { return *diag_; }
  std::string path_of(std::string_view key) const;

  // Looks `key` up and marks it as allowed here; nullptr when absent.
  const Entry* find(std::string_view key);
  // Every entry, all allowed: for maps of names such as queues and handlers.
  const std::vector<Entry>& entries();

  // Reads `key` into `out` when present. A bad value is reported and `out` left unchanged.
  void read(std::string_view key, std::string& out);
  void read(std::string_view key, int& out);
  void read(std::string_view key, bool& out);
  void read(std::string_view key, double& out);
  void read(std::string_view key, Millis& out);
  void read(std::string_view key, std::vector<std::string>& out);
  void read(std::string_view key, std::vector<int>& out);

  // The map under `key`; an empty, not present() section when absent.
  YamlSection section(std::string_view key);

  // Reports every key that no find() asked for, suggesting the closest allowed key.
  void report_unknown_keys();

 private:
  template <typename T>
  void read_scalar(std::string_view key, T& out);
  template <typename T>
  void read_list(std::string_view key, std::vector<T>& out);

  std::string path_;
  int line_;
  bool present_;
  bool is_map_ = false;
  Diagnostics* diag_;  // outlives every section
  std::vector<Entry> entries_;
  std::vector<std::string> allowed_;
  bool all_allowed_ = false;
};

// 1-based line of `node`; `fallback` when it has none. yaml-cpp places an empty value
// ("key:" then a newline) on the next line, so callers pass the key's line for those.
int line_of(const YAML::Node& node, int fallback);

}  // namespace pgjobd::config_detail
