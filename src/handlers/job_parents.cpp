// Job::parents: the payload's `_parents` object, read when a handler asks for it.

#include <nlohmann/json.hpp>

#include "pgjobd/job.hpp"

namespace pgjobd {

std::string Job::parents() const {
  // Most payloads have no parents: the text is searched before anything is parsed.
  if (payload.find("\"_parents\"") == std::string::npos) return {};
  const nlohmann::json parsed = nlohmann::json::parse(payload, nullptr, false);
  if (!parsed.is_object()) return {};
  const auto found = parsed.find("_parents");
  if (found == parsed.end() || !found->is_object()) return {};
  return found->dump();
}

}  // namespace pgjobd
