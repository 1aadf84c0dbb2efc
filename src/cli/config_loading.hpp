#pragma once
// Loading the config for a subcommand: errors go to stderr, naming file, line and key.

#include <optional>
#include <string>

#include "pgjobd/config.hpp"

namespace pgjobd {

// The config, or nullopt after printing every problem (the caller exits with 2).
std::optional<Config> load_config_or_report(const std::string& path);

}  // namespace pgjobd
