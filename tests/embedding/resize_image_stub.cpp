// The one function the README's embedding example leaves to its reader, so that the
// example links (readme_embedding_example in tests/CMakeLists.txt).

#include <stop_token>
#include <string>

bool resize_image(const std::string& payload, std::stop_token stop) {
  return !payload.empty() && !stop.stop_requested();
}
