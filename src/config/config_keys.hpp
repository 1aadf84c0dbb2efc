#pragma once
// Every config key declared once: its name, default, documentation line and whether a live
// reload (SIGHUP) applies it. The parser, the reload and the docs' test all read this table.

#include <span>
#include <string_view>
#include <vector>

#include "pgjobd/config.hpp"

namespace pgjobd {
namespace config_detail {
class YamlSection;
}

enum class Reload {
  kLive,     // SIGHUP applies a new value
  kRestart,  // only a restart does: a reload keeps the old value and says so in the log
};

struct ConfigKey {
  // Dotted path. NAME and TYPE stand for the entries of worker.queues and handlers.
  std::string_view name;
  // As the README's table shows it; "" for a key without one (the handler kinds).
  std::string_view default_text;
  Reload reload;
  // The README's "meaning" cell (Markdown), one line.
  std::string_view doc;
  // Reads the key from its parent section. The reader of a NAME or TYPE key reads every
  // entry of its map; keys inside such an entry have none (that reader reads them).
  void (*read)(config_detail::YamlSection& parent, std::string_view key, Config& config);
  // Compare and copy the key's value. Set for every key with a fixed place in Config; a
  // restart-only key must have them, the reload is built on them.
  bool (*differs)(const Config& a, const Config& b);
  void (*copy)(Config& to, const Config& from);
};

// Every key, in the order of config/pgjobd.yaml and of the README's table.
std::span<const ConfigKey> config_keys();

// The top-level keys (sections), in the table's order.
std::vector<std::string_view> config_sections();

// "worker" and "queues.NAME.concurrency" for "worker.queues.NAME.concurrency".
std::string_view section_of(std::string_view key);
std::string_view below_section(std::string_view key);

}  // namespace pgjobd
