// Config loading with operator-facing error output.

#include "cli/config_loading.hpp"

#include <iostream>

#include "log/secrets.hpp"

namespace pgjobd {

std::vector<std::string> config_use_problems(const Config& config, ConfigUse use,
                                             const std::string& path) {
  std::vector<std::string> problems;
  // `pgjobd run` has no in-process handlers (those are the embedding's, README "In-process
  // C++ handlers"): the file's are all it can run.
  if (use == ConfigUse::kDaemon && config.handlers.empty()) {
    problems.push_back(path + ": no handlers configured: add at least one under `handlers:`");
  }
  if (use == ConfigUse::kDashboard && config.ui.listen.empty()) {
    problems.push_back(path +
                       ": ui.listen is empty, so there is no dashboard to serve (set it, e.g. "
                       "127.0.0.1:9465)");
  }
  return problems;
}

std::optional<Config> load_config_or_report(const std::string& path, ConfigUse use) {
  try {
    Config config = load_config(path);
    // Before anything can log or print a database error: scrub its password everywhere.
    add_database_secrets(config.database.url);
    if (!config.database.listen_url.empty()) add_database_secrets(config.database.listen_url);
    if (auto problems = config_use_problems(config, use, path); !problems.empty()) {
      throw ConfigError(std::move(problems));
    }
    return config;
  } catch (const ConfigError& e) {
    for (const auto& problem : e.problems()) std::cerr << "error: " << problem << "\n";
    std::cerr << path << ": " << e.problems().size() << " error(s) in the configuration\n";
    return std::nullopt;
  }
}

}  // namespace pgjobd
