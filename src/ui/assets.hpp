#pragma once
// The dashboard's stylesheet and script, compiled into the binary from src/ui/assets/ (the
// top-level CMakeLists.txt generates their definitions), so that an installed pgjobd needs
// no files beside it and the pages load nothing from elsewhere.

#include <string_view>

namespace pgjobd::ui {

struct Asset {
  std::string_view content_type;
  std::string_view body;
};

// The asset served at `path` ("/ui/app.css", "/ui/app.js"), or nullptr.
const Asset* find_asset(std::string_view path);

}  // namespace pgjobd::ui
