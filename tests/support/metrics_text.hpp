#pragma once
// The text a scrape of /metrics would return for a Metrics object, for tests of the
// engine's parts that check their series without an HTTP server.

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "metrics/metrics.hpp"
#include "support/build_paths.hpp"

namespace pgjobd::testing {

inline std::string scrape(const Metrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.collectable()->Collect());
}

// The metric families in Prometheus text `text` (its "# TYPE" lines).
inline std::set<std::string> families_in(const std::string& text) {
  std::set<std::string> names;
  static const std::regex kType("^# TYPE (\\S+) ");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, kType)) names.insert(match[1].str());
  }
  return names;
}

// The metric names the README's metrics table lists (every `name` in a row's first cell).
inline std::set<std::string> readme_metric_names() {
  std::ifstream file(source_path("README.md"));
  std::set<std::string> names;
  bool in_section = false;
  static const std::regex kName("`([a-z_]+)`");
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with("### ")) in_section = line.starts_with("### Metrics (");
    if (!in_section || !line.starts_with("| `")) continue;
    const std::string cell = line.substr(1, line.find(" |", 1));
    for (std::sregex_iterator it(cell.begin(), cell.end(), kName), end; it != end; ++it) {
      names.insert((*it)[1].str());
    }
  }
  return names;
}

}  // namespace pgjobd::testing
