#pragma once
// Test support for end-to-end tests: runs the real pgjobd binary (PGJOBD_BINARY) with a YAML
// config, captures its output, signals it and waits for it; plus CLI, HTTP and file helpers.

#include <sys/types.h>

#include <signal.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pgjobd::testing {

using namespace std::chrono_literals;

// Environment changes for a child: name → value, or name → nullopt to remove it. Children
// never inherit PGJOBD_DATABASE_URL, DATABASE_URL, PGJOBD_CONFIG or SPDLOG_LEVEL from the
// test's environment (they would override the config under test); set them here instead.
using EnvOverrides = std::vector<std::pair<std::string, std::optional<std::string>>>;

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to file(name) and returns its path.
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

// Whole file ("" when it does not exist) and its lines (without the newlines).
std::string read_text_file(const std::string& path);
std::vector<std::string> read_lines(const std::string& path);

// `text` as a YAML double-quoted scalar (JSON string syntax, which YAML accepts).
std::string yaml_quote(const std::string& text);
// `text` as one single-quoted /bin/sh word.
std::string shell_quote(const std::string& text);

// Builds a daemon config: every top-level section is one flow mapping, so a test replaces a
// whole section with set() instead of producing duplicate keys. Defaults suit fast tests:
// 10ms..100ms polling, 10ms retries without jitter, 4 workers, 10s shutdown timeout, no
// metrics endpoint (set("metrics", "{listen: \"127.0.0.1:0\"}") for one on a free port).
class DaemonYaml {
 public:
  // database.url is test_database_url(), database.schema is `schema`.
  explicit DaemonYaml(const std::string& schema);

  // Replaces top-level `section` with `flow_map`, e.g. set("shutdown", "{timeout: 1s}").
  DaemonYaml& set(const std::string& section, const std::string& flow_map);
  // handlers.<type>: <flow_map>, e.g. handler("ping", "{builtin: noop}").
  DaemonYaml& handler(const std::string& type, const std::string& flow_map);
  // handlers.<type>: {exec: [/bin/sh, -c, <script>], <extra>}.
  DaemonYaml& shell_handler(const std::string& type, const std::string& script,
                            const std::string& extra = "");
  std::string text() const;

 private:
  std::vector<std::pair<std::string, std::string>> sections_;
  std::vector<std::pair<std::string, std::string>> handlers_;
};

// One pgjobd process: `pgjobd <args...> -c <config file>`, stdout and stderr captured to
// files. The destructor stops a still-running process (SIGTERM, a second SIGTERM, then
// SIGKILL) and reaps it, and prints the log tail when the current test has failed.
// `command_prefix` (searched in PATH) runs before pgjobd and must exec it in the same
// process, e.g. `ip netns exec NAME` (NetnsLink::exec_prefix()).
class DaemonProcess {
 public:
  explicit DaemonProcess(const std::string& config_yaml, std::vector<std::string> args = {"run"},
                         const EnvOverrides& env = {},
                         const std::vector<std::string>& command_prefix = {});
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& config_path() const { return config_path_; }
  const std::string& log_path() const { return stderr_path_; }

  // Sends `sig` to the process (a no-op once it has been reaped).
  void signal(int sig);
  // Whether it still runs; reaps it when it has exited.
  bool running();
  // Waits up to `timeout` for the exit. Returns the exit code (128 + N when killed by signal
  // N), or nullopt if it is still running.
  std::optional<int> wait_for_exit(std::chrono::milliseconds timeout);
  // The exit code once reaped (same encoding as wait_for_exit).
  std::optional<int> exit_code() const { return exit_code_; }

  std::string log() const;     // stderr so far
  std::string output() const;  // stdout so far
  // Waits until the log contains `text`; false on timeout or when the process exited
  // without logging it.
  bool wait_for_log(const std::string& text, std::chrono::milliseconds timeout = 15s);
  // Waits for "pgjobd ready".
  bool wait_ready(std::chrono::milliseconds timeout = 15s) {
    return wait_for_log("pgjobd ready", timeout);
  }
  // The port from "serving /metrics, /healthz and /readyz on port N" (metrics.listen with
  // port 0); 0 when it was not logged within `timeout`.
  int metrics_port(std::chrono::milliseconds timeout = 15s);
  // The port from "dashboard listening on http://127.0.0.1:PORT/" (ui.listen on 127.0.0.1
  // with port 0); 0 when it was not logged within `timeout`.
  int dashboard_port(std::chrono::milliseconds timeout = 15s);

 private:
  // The number logged right after `marker`; 0 when it was not logged within `timeout`.
  int port_after(const std::string& marker, std::chrono::milliseconds timeout);
  void stop_for_cleanup();

  TempDir dir_;
  std::string config_path_;
  std::string stdout_path_;
  std::string stderr_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// SIGCONT on scope exit, so a test failing while a daemon is frozen (SIGSTOP) still lets
// its cleanup drain it.
struct ContinueOnExit {
  DaemonProcess& daemon;
  ~ContinueOnExit() { daemon.signal(SIGCONT); }
};

// SIGTERM, then expects a drain and exit 0 within 20 s.
void stop_daemon(DaemonProcess& daemon);

struct CliResult {
  int exit_code = -1;  // 128 + N when killed by signal N
  std::string out;
  std::string err;
};

// Runs `pgjobd <args...>` to completion (killed after `timeout`, then exit_code is 128 + 9).
CliResult run_cli(const std::vector<std::string>& args, const EnvOverrides& env = {},
                  std::chrono::milliseconds timeout = 30s);

struct HttpResponse {
  long status = 0;  // 0 when the request failed
  std::string body;
  std::string error;  // curl's message when status is 0
};
HttpResponse http_get(int port, const std::string& path);

// The value of the sample `name{labels...}` in Prometheus text `metrics` whose labels include
// all of `labels` (it may have more); nullopt when there is none.
std::optional<double> metric_value(const std::string& metrics, const std::string& name,
                                   const std::map<std::string, std::string>& labels = {});

// A live process (not a zombie) with this pid, whose /proc/PID/comm is `comm` if given.
bool process_alive(pid_t pid, const std::string& comm = "");

// How often `needle` occurs in `text`.
int count_occurrences(const std::string& text, const std::string& needle);

}  // namespace pgjobd::testing
