#pragma once
// Where this build's pgjobd binary and the source tree are. Only build_paths.cpp is
// compiled with the paths (tests/CMakeLists.txt), so every other test file compiles the
// same in any clone's folder and ccache serves it from another clone's build.

#include <string>

namespace pgjobd::testing {

// The pgjobd executable the end-to-end tests run.
const std::string& pgjobd_binary();
// `relative` under the repository's root ("sql/grants.sql").
std::string source_path(const std::string& relative);

}  // namespace pgjobd::testing
