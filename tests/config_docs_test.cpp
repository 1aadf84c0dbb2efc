// Checks that the docs agree with the config key table (src/config/config_keys.cpp): the
// README's configuration table row by row, its SIGHUP paragraph, and config/pgjobd.yaml's
// keys and (restart) marks. Each failure names the key and shows the line to write.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "config/config_keys.hpp"
#include "support/build_paths.hpp"

namespace pgjobd {
namespace {

const std::string kReadme = testing::source_path("README.md");
const std::string kExample = testing::source_path("config/pgjobd.yaml");
const std::string kTableHeader = "| key | default | reload | meaning |";
constexpr std::string_view kRestartMark = "(restart)";

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file) << "cannot read " << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

std::string trim(std::string_view text) {
  std::string_view::size_type first = text.find_first_not_of(' ');
  if (first == std::string_view::npos) return {};
  return std::string(text.substr(first, text.find_last_not_of(' ') - first + 1));
}

// "`x`" → "x"; anything else unchanged.
std::string unquote(const std::string& cell) {
  if (cell.size() >= 2 && cell.front() == '`' && cell.back() == '`') {
    return cell.substr(1, cell.size() - 2);
  }
  return cell;
}

std::string_view reload_word(Reload reload) {
  return reload == Reload::kRestart ? "restart" : "live";
}

// The README row the table calls for.
std::string expected_row(const ConfigKey& key) {
  std::string default_cell =
      key.default_text.empty() ? "" : "`" + std::string(key.default_text) + "`";
  return "| `" + std::string(key.name) + "` | " + default_cell + " | " +
         std::string(reload_word(key.reload)) + " | " + std::string(key.doc) + " |";
}

struct Row {
  std::string default_text;
  std::string reload;
  std::string doc;
};

// The README's config table: key → row, and the keys in their order.
struct ReadmeTable {
  std::map<std::string, Row> rows;
  std::vector<std::string> order;
};

ReadmeTable read_readme_table(const std::vector<std::string>& lines) {
  ReadmeTable table;
  std::size_t i = 0;
  while (i < lines.size() && trim(lines[i]) != kTableHeader) ++i;
  if (i == lines.size()) {
    ADD_FAILURE() << kReadme << " has no table headed " << kTableHeader;
    return table;
  }
  for (i += 2; i < lines.size() && lines[i].starts_with("|"); ++i) {
    std::vector<std::string> cells;
    std::stringstream stream(lines[i].substr(1));
    for (std::string cell; std::getline(stream, cell, '|');) cells.push_back(trim(cell));
    if (cells.size() != 4) {
      ADD_FAILURE() << "README.md line " << i + 1 << " does not have 4 cells: " << lines[i];
      continue;
    }
    std::string key = unquote(cells[0]);
    if (table.rows.count(key) != 0) ADD_FAILURE() << "README.md lists " << key << " twice";
    table.rows[key] = {unquote(cells[1]), cells[2], cells[3]};
    table.order.push_back(key);
  }
  return table;
}

TEST(ConfigDocsTest, ReadmeTableHasEveryDeclaredKeyWithItsDefaultReloadAndMeaning) {
  ReadmeTable readme = read_readme_table(read_lines(kReadme));
  std::vector<std::string> declared;
  for (const ConfigKey& key : config_keys()) {
    declared.emplace_back(key.name);
    auto it = readme.rows.find(std::string(key.name));
    if (it == readme.rows.end()) {
      ADD_FAILURE() << "README.md's config table lacks " << key.name << "; add:\n"
                    << expected_row(key);
      continue;
    }
    const Row& row = it->second;
    EXPECT_EQ(row.default_text, key.default_text)
        << key.name << ": README.md's default differs from config_keys.cpp's; write:\n"
        << expected_row(key);
    EXPECT_EQ(row.reload, reload_word(key.reload))
        << key.name << ": README.md's reload column differs from config_keys.cpp's; write:\n"
        << expected_row(key);
    EXPECT_EQ(row.doc, key.doc) << key.name
                                << ": README.md's meaning differs from config_keys.cpp's; write:\n"
                                << expected_row(key);
  }
  for (const std::string& key : readme.order) {
    EXPECT_NE(std::find(declared.begin(), declared.end(), key), declared.end())
        << "README.md documents " << key << ", which config_keys.cpp does not declare";
  }
  if (readme.rows.size() == declared.size()) {
    EXPECT_EQ(readme.order, declared) << "README.md's rows are not in config_keys.cpp's order";
  }
}

// The paragraph explains the reload column; a list of keys of its own would drift again.
TEST(ConfigDocsTest, ReadmeReloadParagraphDefersToTheTable) {
  std::vector<std::string> lines = read_lines(kReadme);
  std::string paragraph;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].starts_with("SIGHUP re-reads")) continue;
    for (; i < lines.size() && !trim(lines[i]).empty(); ++i) paragraph += lines[i] + "\n";
    break;
  }
  ASSERT_FALSE(paragraph.empty()) << "README.md has no paragraph starting 'SIGHUP re-reads'";
  EXPECT_NE(paragraph.find("`live`"), std::string::npos) << paragraph;
  EXPECT_NE(paragraph.find("`restart`"), std::string::npos) << paragraph;
  for (std::string_view section : config_sections()) {
    for (const std::string& named :
         {"`" + std::string(section) + ".", "`" + std::string(section) + "`"}) {
      EXPECT_TRUE(paragraph.find(named) == std::string::npos)
          << "README.md's SIGHUP paragraph names " << named
          << "...: say which keys reload live in the table's reload column only";
    }
  }
}

// The comment lines directly above line `i`.
std::vector<std::string> comment_above(const std::vector<std::string>& lines, std::size_t i) {
  std::vector<std::string> comment;
  while (i > 0 && trim(lines[i - 1]).starts_with("#")) comment.push_back(lines[--i]);
  return comment;
}

bool marked_restart(const std::vector<std::string>& comment) {
  for (const std::string& line : comment) {
    if (line.find(kRestartMark) != std::string::npos) return true;
  }
  return false;
}

// Every section and every plain key appears in the example; the comment above a key says
// (restart) exactly when a reload cannot change it, and no other comment says (restart).
TEST(ConfigDocsTest, ExampleShowsEveryKeyAndMarksTheRestartOnlyOnes) {
  std::vector<std::string> lines = read_lines(kExample);
  std::size_t header_end = 0;  // the file's opening comment explains the mark
  while (header_end < lines.size() && trim(lines[header_end]).starts_with("#")) ++header_end;
  EXPECT_TRUE(marked_restart(comment_above(lines, header_end)))
      << kExample << "'s opening comment should explain the " << kRestartMark << " mark";

  std::map<std::string, std::size_t> key_lines;  // "section" and "section.key" → line index
  std::string section;
  for (std::size_t i = header_end; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::string::size_type colon = line.find(':');
    // A section shown commented out ("#limits:", no space) counts as shown: for limits,
    // writing the section at all, even empty, changes what the daemon does.
    if (line.starts_with("#") && line.size() > 1 && line[1] != ' ' && line[1] != '#' &&
        colon != std::string::npos && line.find(' ') > colon) {
      key_lines[line.substr(1, colon - 1)] = i;
      continue;
    }
    if (line.empty() || line.starts_with("#") || colon == std::string::npos) continue;
    if (line[0] != ' ') {
      section = line.substr(0, colon);
      key_lines[section] = i;
    } else if (line.starts_with("  ") && line[2] != ' ' && line[2] != '#') {
      key_lines[section + "." + line.substr(2, colon - 2)] = i;
    }
  }

  std::vector<std::size_t> marked_lines;  // comment lines that rightly say (restart)
  for (std::string_view name : config_sections()) {
    EXPECT_EQ(key_lines.count(std::string(name)), 1u) << kExample << " does not show " << name;
  }
  for (const ConfigKey& key : config_keys()) {
    std::string name(key.name);
    if (name.find(".NAME") != std::string::npos || name.find(".TYPE") != std::string::npos) {
      // Shown inside the example's queues and handlers; the last check finds no mark there.
      EXPECT_EQ(key.reload, Reload::kLive)
          << name << " is restart-only inside a map entry: teach this test where " << kExample
          << " shows it";
      continue;
    }
    auto it = key_lines.find(name);
    if (it == key_lines.end()) {
      ADD_FAILURE() << kExample << " does not show " << name << " (default " << key.default_text
                    << ")";
      continue;
    }
    std::vector<std::string> comment = comment_above(lines, it->second);
    bool restart = key.reload == Reload::kRestart;
    EXPECT_EQ(marked_restart(comment), restart)
        << kExample << ": " << name
        << (restart ? " is restart-only: add (restart) to the comment above it"
                    : " reloads live: remove (restart) from the comment above it");
    for (std::size_t j = 1; j <= comment.size() && restart; ++j)
      marked_lines.push_back(it->second - j);
  }
  for (std::size_t i = header_end; i < lines.size(); ++i) {
    if (lines[i].find(kRestartMark) == std::string::npos) continue;
    EXPECT_TRUE(std::find(marked_lines.begin(), marked_lines.end(), i) != marked_lines.end())
        << kExample << ":" << i + 1 << " says " << kRestartMark
        << " above something that is not a restart-only key: " << lines[i];
  }
}

}  // namespace
}  // namespace pgjobd
