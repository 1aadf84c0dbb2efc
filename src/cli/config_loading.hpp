#pragma once
// Loading the config for a subcommand: errors go to stderr, naming file, line and key.

#include <optional>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"

namespace pgjobd {

// What a file is loaded for. A file can be valid YAML for pgjobd and still give a serving
// subcommand nothing to serve; `check-config --for` checks the same rules as that command.
enum class ConfigUse {
  kAny,        // migrate, enqueue, stats, ...: the file's own rules only
  kDaemon,     // `pgjobd run`: at least one handler
  kDashboard,  // `pgjobd ui`: ui.listen set; no handler needed
};

// What `use` refuses in a valid config, each as "PATH: what".
std::vector<std::string> config_use_problems(const Config& config, ConfigUse use,
                                             const std::string& path);

// The config, or nullopt after printing every problem, those of `use` included (the caller
// exits with 2).
std::optional<Config> load_config_or_report(const std::string& path,
                                            ConfigUse use = ConfigUse::kAny);

}  // namespace pgjobd
