#pragma once
// YAML::LoadAll without its endless loop on a stray ',' (yaml-cpp 0.7).

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace pgjobd::config_detail {

// The documents of `text`, as YAML::LoadAll returns them. Throws YAML::Exception on a
// syntax error, including the inputs on which yaml-cpp 0.7's LoadAll never returns.
std::vector<YAML::Node> load_all_documents(const std::string& text);

}  // namespace pgjobd::config_detail
