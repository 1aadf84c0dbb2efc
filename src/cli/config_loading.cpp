// Config loading with operator-facing error output.

#include "cli/config_loading.hpp"

#include <iostream>

#include "log/secrets.hpp"

namespace pgjobd {

std::optional<Config> load_config_or_report(const std::string& path) {
  try {
    Config config = load_config(path);
    // Before anything can log or print a database error: scrub its password everywhere.
    add_database_secrets(config.database.url);
    if (!config.database.listen_url.empty()) add_database_secrets(config.database.listen_url);
    return config;
  } catch (const ConfigError& e) {
    for (const auto& problem : e.problems()) std::cerr << "error: " << problem << "\n";
    std::cerr << path << ": " << e.problems().size() << " error(s) in the configuration\n";
    return std::nullopt;
  }
}

}  // namespace pgjobd
