// The README's "Waiting for a result" quotes tests/examples/, which CI runs
// (tests/e2e/examples_e2etest.cpp): every line it quotes is a line of the example it names,
// so the two cannot drift apart.

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "support/build_paths.hpp"

namespace pgjobd {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string trimmed(const std::string& line) {
  const auto first = line.find_first_not_of(' ');
  if (first == std::string::npos) return {};
  return line.substr(first, line.find_last_not_of(' ') - first + 1);
}

// The code block that follows the first line of the README mentioning `example`.
std::string quoted_block(const std::string& readme, const std::string& example) {
  const auto named = readme.find("`" + example + "`:");
  if (named == std::string::npos) return {};
  const auto open = readme.find("```", named);
  const auto body = readme.find('\n', open) + 1;
  return readme.substr(body, readme.find("\n```", body) - body + 1);
}

TEST(ReadmeExamples, EveryQuotedLineIsInTheExampleCiRuns) {
  const std::string readme = read_file(testing::source_path("README.md"));
  for (const char* example :
       {"tests/examples/wait_for_result.py", "tests/examples/wait_for_result.js"}) {
    SCOPED_TRACE(example);
    std::set<std::string> lines;
    std::istringstream file(read_file(testing::source_path(example)));
    for (std::string line; std::getline(file, line);) lines.insert(trimmed(line));
    const std::string block = quoted_block(readme, example);
    ASSERT_FALSE(block.empty()) << "the README quotes no code after naming it";
    std::istringstream quoted(block);
    for (std::string line; std::getline(quoted, line);) {
      EXPECT_TRUE(lines.count(trimmed(line)) > 0) << "not in the example: " << line;
    }
  }
}

}  // namespace
}  // namespace pgjobd
