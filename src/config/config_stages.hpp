#pragma once
// The two stages of parse_config: read the YAML tree into a Config, then check its rules.

#include <yaml-cpp/yaml.h>

#include "config/diagnostics.hpp"
#include "pgjobd/config.hpp"

namespace pgjobd::config_detail {

// Reads every section of `root` into `config`, reporting unknown keys and wrong types and
// noting the line of each key it reads.
void read_config(const YAML::Node& root, Config& config, Diagnostics& diag);

// Checks value ranges and cross-field rules, skipping keys that already have a problem.
void check_config(const Config& config, Diagnostics& diag);

}  // namespace pgjobd::config_detail
