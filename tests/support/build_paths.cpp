// The two paths, from compile definitions given to this file alone.

#include "support/build_paths.hpp"

namespace pgjobd::testing {

const std::string& pgjobd_binary() {
  static const std::string path = PGJOBD_BINARY;
  return path;
}

std::string source_path(const std::string& relative) {
  return std::string(PGJOBD_SOURCE_DIR) + "/" + relative;
}

}  // namespace pgjobd::testing
