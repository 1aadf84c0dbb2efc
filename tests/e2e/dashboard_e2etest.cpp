// End-to-end: `pgjobd ui` (the dashboard alone) as a deployment meets it: its health
// endpoints, an occupied port, and the README's scripted login run as written.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "support/build_paths.hpp"
#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

// Runs `script` with /bin/sh -e; returns its exit code and its output (stdout and stderr).
std::pair<int, std::string> run_shell(const std::string& script) {
  TempDir dir;
  const std::string path = dir.write("script.sh", script);
  FILE* pipe = popen(("/bin/sh -e " + shell_quote(path) + " 2>&1").c_str(), "r");
  std::string output;
  char buffer[4096];
  for (std::size_t got; (got = fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    output.append(buffer, got);
  }
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

// A listening socket on a free loopback port, closed on destruction.
class HeldPort {
 public:
  HeldPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0 && ::listen(fd_, 1) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~HeldPort() { close(fd_); }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;

  std::string listen() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Starts `pgjobd ui` with `yaml` and expects /healthz 200 and /readyz `ready_status` with a
// body starting `ready_body`.
void expect_probes(DaemonYaml& yaml, long ready_status, const std::string& ready_body) {
  yaml.set("ui", "{listen: \"127.0.0.1:0\"}");
  DaemonProcess ui(yaml.text(), {"ui"});
  const int port = ui.dashboard_port();
  ASSERT_GT(port, 0) << ui.log();
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  const HttpResponse ready = http_get(port, "/readyz");
  EXPECT_EQ(ready.status, ready_status) << ready.body << ready.error;
  EXPECT_TRUE(ready.body.starts_with(ready_body)) << ready.body;
}

// README "Dashboard": someone deploying `pgjobd ui` on a host of its own has the same probes
// as a daemon: /healthz while the process serves, /readyz while the database answers.
TEST(DashboardE2E, UiAloneAnswersHealthzAndReadyz) {
  TestSchema schema;
  DaemonYaml yaml(schema.name());
  expect_probes(yaml, 200, "ready\n");
  // A database nobody listens on: alive, not ready, and the reason says so.
  DaemonYaml unreachable(schema.name());
  unreachable.set("database", "{url: \"postgresql://pgjobd@127.0.0.1:1/pgjobd\", schema: " +
                                  yaml_quote(schema.name()) + "}");
  expect_probes(unreachable, 503, "database: ");
}

// An occupied port named with its address and why (README "HTTP endpoints": exit code 1),
// for the dashboard and for the daemon's /metrics; not civetweb's "null context when
// constructing CivetServer. Possible problem binding to port."
TEST(DashboardE2E, OccupiedPortSaysWhichAddressAndWhy) {
  TestSchema schema;
  HeldPort held;
  DaemonYaml yaml(schema.name());
  yaml.set("ui", "{listen: \"" + held.listen() + "\"}").handler("ping", "{builtin: noop}");
  DaemonProcess ui(yaml.text(), {"ui"});
  EXPECT_EQ(ui.wait_for_exit(20s), 1) << ui.log();
  EXPECT_NE(ui.log().find("cannot listen on " + held.listen() + ": address already in use"),
            std::string::npos)
      << ui.log();

  DaemonYaml daemon_yaml(schema.name());
  daemon_yaml.set("metrics", "{listen: \"" + held.listen() + "\"}")
      .handler("ping", "{builtin: noop}");
  DaemonProcess daemon(daemon_yaml.text());
  EXPECT_EQ(daemon.wait_for_exit(20s), 1) << daemon.log();
  EXPECT_NE(daemon.log().find("cannot listen on " + held.listen() + ": address already in use"),
            std::string::npos)
      << daemon.log();
}

// The README's shell block after "<!-- dashboard-login-example", without its list
// indentation; "" when there is none.
std::string readme_login_example() {
  std::ifstream readme(source_path("README.md"));
  std::string script;
  bool marked = false;
  bool inside = false;
  for (std::string line; std::getline(readme, line);) {
    const std::size_t text = line.find_first_not_of(' ');
    const std::string body = text == std::string::npos ? "" : line.substr(text);
    if (body.starts_with("<!-- dashboard-login-example")) {
      marked = true;
    } else if (marked && !inside && body == "```sh") {
      inside = true;
    } else if (inside && body == "```") {
      return script;
    } else if (inside) {
      script += body.empty() ? "\n" : line.substr(std::min(text, std::size_t{2})) + "\n";
    }
  }
  return "";
}

// README "Dashboard", "From a script": the curl example logs in and pauses a queue as
// written (only the address changed), where a plain `curl -d user=...` gets 403.
TEST(DashboardE2E, ReadmeScriptedLoginWorksAsWritten) {
  std::string script = readme_login_example();
  ASSERT_FALSE(script.empty()) << "README.md has no dashboard-login-example sh block";
  const auto [hashed, hash_output] =
      run_shell("printf '%s\\n' alice-secret | " + shell_quote(pgjobd_binary()) +
                " ui-passwd --password-stdin");
  ASSERT_EQ(hashed, 0) << hash_output;
  const std::string hash = hash_output.substr(0, hash_output.find('\n'));

  TestSchema schema;
  DaemonYaml yaml(schema.name());
  yaml.set("ui", "{listen: \"127.0.0.1:0\", users: {alice: {password_hash: " + yaml_quote(hash) +
                     ", role: operator}}}");
  DaemonProcess ui(yaml.text(), {"ui"});
  const int port = ui.dashboard_port();
  ASSERT_GT(port, 0) << ui.log();
  const std::string documented = "http://127.0.0.1:9465";
  const std::size_t at = script.find(documented);
  ASSERT_NE(at, std::string::npos) << script;
  script.replace(at, documented.size(), "http://127.0.0.1:" + std::to_string(port));

  // What the issue met: the plain form is refused.
  const auto [plain, plain_output] = run_shell(
      "curl -sS -o /dev/null -w '%{http_code}' -d 'user=alice&password=alice-secret' "
      "http://127.0.0.1:" +
      std::to_string(port) + "/login");
  EXPECT_EQ(plain_output, "403");

  const auto [code, output] = run_shell("PASSWORD=alice-secret\n" + script);
  EXPECT_EQ(code, 0) << output << "\n" << script;
  EXPECT_EQ(schema.query("SELECT paused FROM " + schema.qualified("pgjobd_queues") +
                         " WHERE queue = 'default'"),
            "t")
      << ui.log();
  EXPECT_EQ(schema.query("SELECT user_name FROM " + schema.qualified("pgjobd_audit") +
                         " WHERE action = 'pause_queue'"),
            "alice");
}

}  // namespace
}  // namespace pgjobd::testing
