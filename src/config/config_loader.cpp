// Entry points of the config module: read a file, parse and validate it, apply the environment.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <system_error>

#include "config/config_stages.hpp"
#include "config/diagnostics.hpp"
#include "config/yaml_documents.hpp"
#include "pgjobd/config.hpp"

namespace pgjobd {
namespace {

std::string join_lines(const std::vector<std::string>& lines) {
  std::string joined;
  for (const std::string& line : lines) joined += (joined.empty() ? "" : "\n") + line;
  return joined;
}

// The whole file, or a ConfigError naming it and the system's reason.
std::string read_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  auto fail = [&] {
    throw ConfigError(
        {path + ": cannot read: " + std::error_code(errno, std::system_category()).message()});
  };
  if (!file) fail();
  std::string text;
  char buffer[8192];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, n);
  // fopen succeeds on a directory; the read then fails with EISDIR.
  if (std::ferror(file.get()) != 0) fail();
  return text;
}

}  // namespace

ConfigError::ConfigError(std::vector<std::string> problems)
    : std::runtime_error(join_lines(problems)), problems_(std::move(problems)) {}

Config parse_config(const std::string& yaml_text, const std::string& source_name) {
  config_detail::Diagnostics diag(source_name);
  std::vector<YAML::Node> documents;
  try {
    documents = config_detail::load_all_documents(yaml_text);
  } catch (const YAML::Exception& e) {  // parser errors, undefined aliases, ...
    diag.add(e.mark.line + 1, "", "YAML syntax error: " + e.msg);
    diag.throw_if_any();
  }
  Config config;
  if (documents.size() > 1) {
    // yaml-cpp would read only the first; the rest would be silently ignored.
    diag.add(0, "",
             "holds " + std::to_string(documents.size()) +
                 " YAML documents (separated by ---); expected one");
  } else if (!documents.empty()) {  // an empty file means all defaults
    config_detail::read_config(documents.front(), config, diag);
  }
  config_detail::check_config(config, diag);
  diag.throw_if_any();
  return config;
}

void validate_config(const Config& config, const std::string& source_name) {
  config_detail::Diagnostics diag(source_name);
  config_detail::check_config(config, diag);
  diag.throw_if_any();
}

Millis effective_call_timeout(const Config& config) {
  if (config.database.call_timeout.count() > 0) return config.database.call_timeout;
  return std::clamp<Millis>(config.lease.duration / 2, Millis(2000), Millis(60000));
}

void apply_environment(Config& config) {
  for (const char* name : {"PGJOBD_DATABASE_URL", "DATABASE_URL"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') {
      config.database.url = value;
      return;
    }
  }
}

Config load_config(const std::string& path) {
  Config config = parse_config(read_file(path), path);
  apply_environment(config);
  return config;
}

}  // namespace pgjobd
