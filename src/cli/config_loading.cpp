// Config loading with operator-facing error output.

#include "cli/config_loading.hpp"

#include <iostream>

namespace pgjobd {

std::optional<Config> load_config_or_report(const std::string& path) {
  try {
    return load_config(path);
  } catch (const ConfigError& e) {
    for (const auto& problem : e.problems()) std::cerr << "error: " << problem << "\n";
    std::cerr << path << ": " << e.problems().size() << " error(s) in the configuration\n";
    return std::nullopt;
  }
}

}  // namespace pgjobd
