// Unit tests for the config key table and the reload rules built on it: each key is declared
// once, the parser reads exactly the declared keys with the declared defaults, and a reload
// keeps exactly the restart-only keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_keys.hpp"
#include "config/config_reload.hpp"
#include "pgjobd/config.hpp"
#include "support/config_problems.hpp"

namespace pgjobd {
namespace {

bool has_placeholder(std::string_view name) {
  return name.find(".NAME") != std::string_view::npos ||
         name.find(".TYPE") != std::string_view::npos;
}

std::vector<std::string> split(std::string_view name) {
  std::vector<std::string> parts;
  std::string_view::size_type start = 0;
  while (true) {
    std::string_view::size_type dot = name.find('.', start);
    parts.emplace_back(name.substr(start, dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

// Block YAML for the map path `parts` (NAME and TYPE replaced by real names), with `leaf`
// written in the innermost map when not empty.
std::string nested_yaml(const std::vector<std::string>& parts, const std::string& leaf) {
  std::string yaml;
  std::string indent;
  for (const std::string& part : parts) {
    yaml += indent + (part == "NAME" ? "q" : part == "TYPE" ? "t" : part) + ":\n";
    indent += "  ";
  }
  if (!leaf.empty()) yaml += indent + leaf + "\n";
  return yaml;
}

using testing::problems_of;

// Every key with a fixed place in Config set to a value other than its default.
Config everything_changed() {
  return parse_config(R"(
database: {url: "postgresql://u@db/app", schema: jobs_1, migrate_on_start: yes,
           synchronous_claims: true, pooler: transaction, listen_url: "postgresql://u@db:5432/app",
           call_timeout: 7s}
worker: {concurrency: 32, queues: {fast: {concurrency: 8}}, max_payload_bytes: 65536,
         max_result_bytes: 100, prefetch: 5, notify_finished: false,
         scheduling: normal}
poll: {min_interval: 250ms, max_interval: 1m, listen_notify: off}
retry: {base: 2s, max_delay: 1h, jitter: 0}
lease: {duration: 1m}
shutdown: {timeout: 0}
retention: {done: 0, dead: 30d}
metrics: {listen: "[::1]:0"}
log: {level: debug, format: json}
ui: {listen: "127.0.0.1:0", show_payloads: false, refresh: 10s, session_ttl: 1h,
     statement_timeout: 5s,
     users: {alice: {password_hash: "$y$j9T$abcdefghijklmnop$0123456789", role: read_only}}}
handlers: {ping: {builtin: noop}}
)",
                      "changed.yaml");
}

TEST(ConfigKeysTest, EachKeyIsDeclaredOnce) {
  std::set<std::string_view> seen;
  for (const ConfigKey& key : config_keys()) {
    EXPECT_TRUE(seen.insert(key.name).second) << key.name << " is declared twice";
    EXPECT_FALSE(key.doc.empty()) << key.name << " has no documentation";
    EXPECT_EQ(key.doc.find('|'), std::string_view::npos)
        << key.name << ": a | would split the README's table cell";
  }
}

TEST(ConfigKeysTest, EveryKeyIsReadAndRestartOnlyKeysCanBeKept) {
  for (const ConfigKey& key : config_keys()) {
    if (key.read != nullptr) {
      EXPECT_EQ(split(key.name).size(), 2u) << key.name << ": only section.key is read generically";
    }
    // A key without accessors lives in a map entry, which its map's reader reads.
    if (key.differs == nullptr) {
      EXPECT_TRUE(has_placeholder(key.name)) << key.name << " has no place in Config";
    }
    if (key.reload == Reload::kRestart) {
      EXPECT_TRUE(key.differs != nullptr && key.copy != nullptr)
          << key.name << " is restart-only, so the reload must be able to compare and keep it";
    }
  }
}

TEST(ConfigKeysTest, DeclaredDefaultsAreTheStructsDefaults) {
  for (const ConfigKey& key : config_keys()) {
    if (key.default_text.empty()) continue;
    std::vector<std::string> parts = split(key.name);
    std::string leaf = parts.back();
    parts.pop_back();
    // A handler needs a kind, a schedule its timing and type; a queue needs nothing.
    std::string sibling = parts.size() == 2 && parts[0] == "handlers" ? "exec: [/bin/true]" : "";
    if (parts.size() == 2 && parts[0] == "schedules") sibling = "every: 1m\n    type: t";
    // A limit matches and limits something, with keys other than the one written.
    if (parts.size() == 2 && parts[0] == "limits") {
      sibling = leaf == "types" ? "queues: [q]\n    rate: 1/s" : "types: [t]\n    rate: 1/s";
    }
    std::string without = nested_yaml(parts, sibling);
    std::string with = without + std::string(2 * parts.size(), ' ') + leaf + ": " +
                       std::string(key.default_text) + "\n";
    Config written = parse_config(with, "with.yaml");
    EXPECT_TRUE(written == parse_config(without, "without.yaml"))
        << key.name << ": writing the declared default " << key.default_text
        << " gives another value than leaving the key out:\n"
        << with;
  }
}

// The maps the table declares (a path and its keys), leaving out maps of names.
std::map<std::string, std::set<std::string>> declared_maps() {
  std::map<std::string, std::set<std::string>> maps;
  for (const ConfigKey& key : config_keys()) {
    std::vector<std::string> parts = split(key.name);
    std::string path;
    for (const std::string& part : parts) {
      if (part != "NAME" && part != "TYPE") maps[path].insert(part);
      path += (path.empty() ? "" : ".") + part;
    }
  }
  return maps;
}

// The parser's known keys of each map, as its "unknown key (expected one of: ...)" lists
// them, are the table's: the hand-written readers of queues and handlers too.
TEST(ConfigKeysTest, TheParserKnowsExactlyTheDeclaredKeys) {
  const std::string kPrefix = "unknown key (expected one of: ";
  for (const auto& [path, keys] : declared_maps()) {
    std::vector<std::string> parts = path.empty() ? std::vector<std::string>{} : split(path);
    std::string yaml = nested_yaml(parts, "zzzzzzzzzz: 1");
    std::set<std::string> known;
    bool reported = false;
    for (const std::string& problem : problems_of(yaml)) {
      std::string::size_type start = problem.find(kPrefix);
      if (start == std::string::npos) continue;
      reported = true;
      std::string list = problem.substr(start + kPrefix.size());
      list = list.substr(0, list.find(')'));
      std::string::size_type from = 0;
      for (std::string::size_type comma; (comma = list.find(", ", from)) != std::string::npos;
           from = comma + 2) {
        known.insert(list.substr(from, comma - from));
      }
      known.insert(list.substr(from));
    }
    ASSERT_TRUE(reported) << "no unknown key reported in:\n" << yaml;
    EXPECT_EQ(known, keys) << "the parser's keys of '" << path
                           << "' (left) differ from the table's (right)";
  }
}

TEST(ConfigKeysTest, EachAccessorReachesItsOwnField) {
  const Config defaults;
  const Config changed = everything_changed();
  for (const ConfigKey& key : config_keys()) {
    if (key.differs == nullptr) continue;
    EXPECT_TRUE(key.differs(defaults, changed))
        << key.name << ": everything_changed() must change it too";
    Config one = defaults;
    key.copy(one, changed);
    for (const ConfigKey& other : config_keys()) {
      if (other.differs == nullptr) continue;
      EXPECT_EQ(other.differs(defaults, one), other.name == key.name)
          << "copying " << key.name << " changed " << other.name;
    }
  }
}

TEST(ConfigReloadTest, SameConfigNeedsNoRestart) {
  EXPECT_TRUE(keys_needing_restart(Config{}, Config{}).empty());
  EXPECT_TRUE(keys_needing_restart(everything_changed(), everything_changed()).empty());
}

TEST(ConfigReloadTest, EachKeyChangedAloneIsReloadedOrReported) {
  const Config current;
  const Config changed = everything_changed();
  for (const ConfigKey& key : config_keys()) {
    if (key.differs == nullptr) continue;
    Config next = current;
    key.copy(next, changed);
    bool restart = key.reload == Reload::kRestart;
    EXPECT_EQ(
        keys_needing_restart(current, next),
        restart ? std::vector<std::string>{std::string(key.name)} : std::vector<std::string>{});
    EXPECT_TRUE(reloadable_part(current, next) == (restart ? current : next))
        << key.name << (restart ? " was applied" : " was not applied");
  }
}

// The classification itself, spelled out: a key moving between live and restart is a
// decision, which this test makes visible.
TEST(ConfigReloadTest, RestartOnlyKeysInTableOrder) {
  EXPECT_EQ(keys_needing_restart(Config{}, everything_changed()),
            (std::vector<std::string>{
                "database.url", "database.schema", "database.migrate_on_start",
                "database.synchronous_claims", "database.pooler", "database.listen_url",
                "database.call_timeout", "worker.scheduling", "poll.listen_notify",
                "lease.duration", "metrics.listen", "ui.listen", "ui.statement_timeout"}));
}

TEST(ConfigReloadTest, ReloadablePartTakesLiveKeysFromNextAndTheRestFromCurrent) {
  const Config current;
  const Config next = everything_changed();
  Config expected = next;
  expected.database = current.database;
  expected.worker.scheduling = current.worker.scheduling;
  expected.poll.listen_notify = current.poll.listen_notify;
  expected.lease = current.lease;
  expected.metrics = current.metrics;
  expected.ui.listen = current.ui.listen;
  expected.ui.statement_timeout = current.ui.statement_timeout;
  Config applied = reloadable_part(current, next);
  EXPECT_TRUE(applied == expected);
  EXPECT_EQ(applied.worker.concurrency, 32);
  EXPECT_EQ(applied.handlers.count("ping"), 1u);
  EXPECT_EQ(applied.poll.min_interval, Millis(250));
  EXPECT_TRUE(applied.poll.listen_notify);
  EXPECT_EQ(applied.database.url, current.database.url);
}

}  // namespace
}  // namespace pgjobd
