#pragma once
// What a live reload (SIGHUP) may change, decided by the key table (config_keys.hpp): the
// engine asks these instead of listing keys of its own.

#include <string>
#include <vector>

#include "pgjobd/config.hpp"

namespace pgjobd {

// The dotted names of the restart-only keys whose value differs between `current` and
// `next`, in the table's order; empty when a reload can apply all of `next`.
std::vector<std::string> keys_needing_restart(const Config& current, const Config& next);

// `next` with every restart-only key kept at its value in `current`: the configuration a
// reload puts in force.
Config reloadable_part(const Config& current, const Config& next);

}  // namespace pgjobd
