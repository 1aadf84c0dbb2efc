#pragma once
// What parse_config says about a YAML text that it must refuse, for the config tests.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pgjobd/config.hpp"

namespace pgjobd::testing {

// The problems parse_config reports for `yaml` (source name "t.yaml"), none when it
// accepts it.
inline std::vector<std::string> problems_of(const std::string& yaml) {
  try {
    parse_config(yaml, "t.yaml");
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

// The problems parse_config reports for `yaml` (source name "t.yaml"), or a test failure
// if it accepts it.
inline std::vector<std::string> problems(const std::string& yaml) {
  try {
    parse_config(yaml, "t.yaml");
    ADD_FAILURE() << "accepted:\n" << yaml;
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

// The single problem reported for `yaml`.
inline std::string problem(const std::string& yaml) {
  std::vector<std::string> found = problems(yaml);
  EXPECT_EQ(found.size(), 1u) << ::testing::PrintToString(found);
  return found.empty() ? "" : found.front();
}

}  // namespace pgjobd::testing
