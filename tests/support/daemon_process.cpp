// DaemonProcess, run_cli and the small file, YAML, HTTP and /proc helpers of the e2e tests.

#include "support/daemon_process.hpp"
#include "support/build_paths.hpp"

#include <curl/curl.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/test_database.hpp"

extern char** environ;

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Variables that would override the config under test if a child inherited them.
const std::set<std::string> kScrubbedVariables = {"PGJOBD_DATABASE_URL", "DATABASE_URL",
                                                  "PGJOBD_CONFIG", "SPDLOG_LEVEL"};

std::vector<std::string> child_environment(const EnvOverrides& overrides) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto equals = text.find('=');
    if (equals == std::string::npos) continue;
    const std::string name = text.substr(0, equals);
    if (kScrubbedVariables.contains(name)) continue;
    env[name] = text.substr(equals + 1);
  }
  for (const auto& [name, value] : overrides) {
    if (value) {
      env[name] = *value;
    } else {
      env.erase(name);
    }
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::vector<char*> to_c_array(std::vector<std::string>& strings) {
  std::vector<char*> array;
  for (std::string& text : strings) array.push_back(text.data());
  array.push_back(nullptr);
  return array;
}

// posix_spawn of PGJOBD_BINARY (after `prefix`, if any) with stdin from /dev/null and
// stdout/stderr to files, in a clean signal state (no blocked or ignored signals inherited
// from the test runner).
pid_t spawn_pgjobd(const std::vector<std::string>& args, const EnvOverrides& env,
                   const std::string& stdout_path, const std::string& stderr_path,
                   const std::vector<std::string>& prefix = {}) {
  std::vector<std::string> argv_strings = prefix;
  argv_strings.push_back(pgjobd_binary());
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = child_environment(env);
  std::vector<char*> argv = to_c_array(argv_strings);
  std::vector<char*> envp = to_c_array(env_strings);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t empty;
  sigemptyset(&empty);
  sigset_t defaults;
  sigfillset(&defaults);
  sigdelset(&defaults, SIGKILL);
  sigdelset(&defaults, SIGSTOP);
  posix_spawnattr_setsigmask(&attributes, &empty);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  const int error =
      posix_spawnp(&pid, argv_strings[0].c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    throw std::runtime_error("cannot start " + argv_strings[0] + ": " + std::strerror(error));
  }
  return pid;
}

int decode_wait_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// waitpid with a deadline; nullopt when the child still runs at the deadline.
std::optional<int> wait_pid(pid_t pid, Clock::time_point deadline) {
  while (true) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return decode_wait_status(status);
    if (got < 0 && errno != EINTR) return -1;  // not our child any more: treat as gone
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::string last_lines(const std::string& text, std::size_t n) {
  std::size_t pos = text.size();
  for (std::size_t lines = 0; pos > 0 && lines <= n; --pos) {
    if (text[pos - 1] == '\n') ++lines;
    if (lines > n) break;
  }
  return text.substr(pos);
}

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/pgjobd-e2e-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  const std::string path = file(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
  return path;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(read_text_file(path));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string yaml_quote(const std::string& text) { return nlohmann::json(text).dump(); }

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

DaemonYaml::DaemonYaml(const std::string& schema) {
  sections_ = {
      {"database", "{url: " + yaml_quote(test_database_url()) + ", schema: " + schema + "}"},
      {"worker", "{concurrency: 4}"},
      {"poll", "{min_interval: 10ms, max_interval: 100ms}"},
      {"retry", "{base: 10ms, max_delay: 100ms, jitter: 0}"},
      {"shutdown", "{timeout: 10s}"},
      // Off unless a test needs it: stopping the HTTP server (civetweb) adds up to 2 s to
      // every shutdown. Tests that want it set("metrics", "{listen: \"127.0.0.1:0\"}").
      {"metrics", "{listen: \"\"}"},
      {"log", "{level: info}"},
  };
}

DaemonYaml& DaemonYaml::set(const std::string& section, const std::string& flow_map) {
  for (auto& [name, value] : sections_) {
    if (name == section) {
      value = flow_map;
      return *this;
    }
  }
  sections_.emplace_back(section, flow_map);
  return *this;
}

DaemonYaml& DaemonYaml::handler(const std::string& type, const std::string& flow_map) {
  handlers_.emplace_back(type, flow_map);
  return *this;
}

DaemonYaml& DaemonYaml::shell_handler(const std::string& type, const std::string& script,
                                      const std::string& extra) {
  std::string flow = "{exec: [/bin/sh, -c, " + yaml_quote(script) + "]";
  if (!extra.empty()) flow += ", " + extra;
  return handler(type, flow + "}");
}

std::string DaemonYaml::text() const {
  std::string yaml;
  for (const auto& [name, value] : sections_) yaml += name + ": " + value + "\n";
  if (!handlers_.empty()) {
    yaml += "handlers:\n";
    for (const auto& [type, value] : handlers_) yaml += "  " + type + ": " + value + "\n";
  }
  return yaml;
}

DaemonProcess::DaemonProcess(const std::string& config_yaml, std::vector<std::string> args,
                             const EnvOverrides& env,
                             const std::vector<std::string>& command_prefix) {
  config_path_ = dir_.write("pgjobd.yaml", config_yaml);
  stdout_path_ = dir_.file("stdout");
  stderr_path_ = dir_.file("stderr");
  args.push_back("-c");
  args.push_back(config_path_);
  pid_ = spawn_pgjobd(args, env, stdout_path_, stderr_path_, command_prefix);
}

DaemonProcess::~DaemonProcess() {
  if (running()) stop_for_cleanup();
  if (::testing::Test::HasFailure()) {
    std::cerr << "---- pgjobd (pid " << pid_ << ") stderr, last lines ----\n"
              << last_lines(log(), 60) << "---- end of pgjobd stderr ----\n";
  }
}

// A test that failed half-way can leave the daemon running jobs: let it release them and
// stop its handlers (two SIGTERMs), and only then fall back to SIGKILL.
void DaemonProcess::stop_for_cleanup() {
  signal(SIGTERM);
  if (wait_for_log("received: draining", 2s) && running()) signal(SIGTERM);
  if (!wait_for_exit(10s)) {
    signal(SIGKILL);
    wait_for_exit(10s);
  }
}

void DaemonProcess::signal(int sig) {
  if (!exit_code_ && pid_ > 0) ::kill(pid_, sig);
}

bool DaemonProcess::running() { return !wait_for_exit(0ms).has_value(); }

std::optional<int> DaemonProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  if (!exit_code_) exit_code_ = wait_pid(pid_, Clock::now() + timeout);
  return exit_code_;
}

std::string DaemonProcess::log() const { return read_text_file(stderr_path_); }

std::string DaemonProcess::output() const { return read_text_file(stdout_path_); }

bool DaemonProcess::wait_for_log(const std::string& text, std::chrono::milliseconds timeout) {
  return wait_until(
             [&] {
               const bool exited = !running();
               return log().find(text) != std::string::npos || exited;
             },
             timeout) &&
         log().find(text) != std::string::npos;
}

int DaemonProcess::port_after(const std::string& marker, std::chrono::milliseconds timeout) {
  if (!wait_for_log(marker, timeout)) return 0;
  const std::string text = log();
  return std::atoi(text.c_str() + text.find(marker) + marker.size());
}

int DaemonProcess::metrics_port(std::chrono::milliseconds timeout) {
  return port_after("serving /metrics, /healthz and /readyz on port ", timeout);
}

int DaemonProcess::dashboard_port(std::chrono::milliseconds timeout) {
  return port_after("dashboard listening on http://127.0.0.1:", timeout);
}

CliResult run_cli(const std::vector<std::string>& args, const EnvOverrides& env,
                  std::chrono::milliseconds timeout) {
  TempDir dir;
  const std::string out_path = dir.file("stdout");
  const std::string err_path = dir.file("stderr");
  const pid_t pid = spawn_pgjobd(args, env, out_path, err_path);
  CliResult result;
  std::optional<int> code = wait_pid(pid, Clock::now() + timeout);
  if (!code) {
    ::kill(pid, SIGKILL);
    code = wait_pid(pid, Clock::now() + 10s);
    ADD_FAILURE() << "pgjobd did not finish within " << timeout.count() << "ms";
  }
  result.exit_code = code.value_or(-1);
  result.out = read_text_file(out_path);
  result.err = read_text_file(err_path);
  return result;
}

HttpResponse http_get(int port, const std::string& path) {
  HttpResponse response;
  CURL* curl = curl_easy_init();
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  } else {
    response.error = curl_easy_strerror(code);
  }
  curl_easy_cleanup(curl);
  return response;
}

std::optional<double> metric_value(const std::string& metrics, const std::string& name,
                                   const std::map<std::string, std::string>& labels) {
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || !line.starts_with(name)) continue;
    const char after = line.size() > name.size() ? line[name.size()] : '\0';
    if (after != '{' && after != ' ') continue;  // another metric sharing the prefix
    bool matches = true;
    for (const auto& [key, value] : labels) {
      if (line.find(key + "=\"" + value + "\"") == std::string::npos) matches = false;
    }
    if (!matches) continue;
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    return std::stod(line.substr(space + 1));
  }
  return std::nullopt;
}

bool process_alive(pid_t pid, const std::string& comm) {
  const std::string stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  // "PID (comm) STATE ...": comm may hold spaces and parentheses, so take the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  if (stat[close + 2] == 'Z' || stat[close + 2] == 'X') return false;
  if (comm.empty()) return true;
  std::string actual = read_text_file("/proc/" + std::to_string(pid) + "/comm");
  while (!actual.empty() && actual.back() == '\n') actual.pop_back();
  return actual == comm;
}

int count_occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

void stop_daemon(DaemonProcess& daemon) {
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_for_exit(20s), 0) << "pgjobd did not drain and exit 0 after SIGTERM";
}

}  // namespace pgjobd::testing
