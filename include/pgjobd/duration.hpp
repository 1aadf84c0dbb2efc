#pragma once
// Durations as written in the config: "250ms", "5s", "10m", "1h", "7d" (and "0").

#include <chrono>
#include <string>
#include <string_view>

namespace pgjobd {

using Millis = std::chrono::milliseconds;

// Parses a duration. Throws std::invalid_argument naming the bad text on error.
Millis parse_duration(std::string_view text);

// Formats a duration in the largest unit that is exact ("1500ms", "5s", "10m").
std::string format_duration(Millis duration);

}  // namespace pgjobd
