// The reload's two questions, answered from the key table: which changed keys need a restart,
// and what the new configuration is once those keys keep their old values.
#include "config/config_reload.hpp"

#include <stdexcept>

#include "config/config_keys.hpp"

namespace pgjobd {
namespace {

// config_keys_test checks the table, so this only guards against an entry added since.
void require_accessors(const ConfigKey& key) {
  if (key.differs == nullptr || key.copy == nullptr) {
    throw std::logic_error("config key " + std::string(key.name) +
                           " is restart-only but cannot be compared or copied");
  }
}

}  // namespace

std::vector<std::string> keys_needing_restart(const Config& current, const Config& next) {
  std::vector<std::string> keys;
  for (const ConfigKey& key : config_keys()) {
    if (key.reload != Reload::kRestart) continue;
    require_accessors(key);
    if (key.differs(current, next)) keys.emplace_back(key.name);
  }
  return keys;
}

Config reloadable_part(const Config& current, const Config& next) {
  Config applied = next;
  for (const ConfigKey& key : config_keys()) {
    if (key.reload != Reload::kRestart) continue;
    require_accessors(key);
    key.copy(applied, current);
  }
  return applied;
}

}  // namespace pgjobd
