#pragma once
// Logging setup (spdlog) and secret masking.

#include <memory>
#include <string>
#include <string_view>

#include "pgjobd/config.hpp"

namespace spdlog {
class formatter;
}

namespace pgjobd {

// The formatter setup_logging installs: "json" or "text" (log.format).
std::unique_ptr<spdlog::formatter> make_log_formatter(const std::string& format);

// Configures the default spdlog logger: stderr, text (a terminal) or JSON lines
// ({"ts","level","msg",...}). SPDLOG_LEVEL in the environment wins over config.level.
void setup_logging(const LogConfig& config);

// Hides the password of a libpq URL ("postgresql://u:secret@h/db" → "postgresql://u:***@h/db")
// or key=value string ("password=secret" → "password=***"), also when malformed, and the
// process's secrets (log/secrets.hpp) wherever they appear. Safe on any text.
std::string mask_password(std::string_view conninfo);

}  // namespace pgjobd
