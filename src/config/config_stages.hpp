#pragma once
// The two stages of parse_config: read the YAML tree into a Config, then check its rules.

#include <yaml-cpp/yaml.h>

#include <string_view>

#include "config/diagnostics.hpp"
#include "pgjobd/config.hpp"

namespace pgjobd::config_detail {

// Reads every key config_keys() declares from `root` into `config`, reporting unknown keys
// and wrong types and noting the line of each key it reads.
void read_config(const YAML::Node& root, Config& config, Diagnostics& diag);

class YamlSection;

// The readers of the two maps of names, which the key table points at: `key` of `worker`
// (every queue and its settings) and every entry of `handlers` (`key` is "TYPE").
void read_queues(YamlSection& worker, std::string_view key, Config& config);
void read_handlers(YamlSection& handlers, std::string_view key, Config& config);
// Every entry of `schedules` (`key` is "NAME"), its payload turned into JSON text.
void read_schedules(YamlSection& schedules, std::string_view key, Config& config);

// Every entry of `limits` (`key` is "NAME"); the section's presence is kept (Config::limits).
void read_limits(YamlSection& limits, std::string_view key, Config& config);
// "10/s", "60/m", "100/h" as starts per second; 0 when the text is not such a rate.
double parse_limit_rate(std::string_view text);

// Checks value ranges and cross-field rules, skipping keys that already have a problem.
void check_config(const Config& config, Diagnostics& diag);

}  // namespace pgjobd::config_detail
