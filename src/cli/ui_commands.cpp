// `pgjobd ui` (the dashboard alone, no workers) and `pgjobd ui-passwd` (a password hash for
// ui.users), plus the dashboard's start for `pgjobd run`.
#include <pthread.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <iostream>
#include <string>

#include "cli/commands.hpp"
#include "cli/config_loading.hpp"
#include "config/config_reload.hpp"
#include "log/logging.hpp"
#include "log/secrets.hpp"
#include "ui/auth.hpp"
#include "ui/ui_server.hpp"
#include "ui/ui_store_factory.hpp"

namespace pgjobd {
namespace {

// Reads one line from the terminal without echoing it.
std::string read_hidden(const char* prompt) {
  std::cerr << prompt << std::flush;
  termios old_mode{};
  const bool tty = tcgetattr(STDIN_FILENO, &old_mode) == 0;
  if (tty) {
    termios quiet = old_mode;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
  }
  std::string line;
  std::getline(std::cin, line);
  if (tty) {
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &old_mode);
    std::cerr << "\n";
  }
  return line;
}

}  // namespace

std::unique_ptr<ui::UiServer> start_dashboard(const Config& config) {
  auto server = std::make_unique<ui::UiServer>(
      config.ui, ui::make_pg_ui_store(config.database, config.ui.statement_timeout));
  const std::string& listen = config.ui.listen;
  spdlog::info("dashboard listening on http://{}:{}/ ({})", listen.substr(0, listen.rfind(':')),
               server->port(),
               config.ui.users.empty() ? "no users: everyone on this machine is an operator"
                                       : std::to_string(config.ui.users.size()) + " user(s)");
  return server;
}

int run_ui_passwd(bool password_stdin) {
  std::string password;
  if (password_stdin) {
    std::getline(std::cin, password);
    if (!password.empty() && password.back() == '\r') password.pop_back();
  } else {
    if (isatty(STDIN_FILENO) == 0) {
      std::cerr << "error: stdin is not a terminal: pass the password with --password-stdin\n";
      return kExitUsage;
    }
    password = read_hidden("Password: ");
    if (read_hidden("Again: ") != password) {
      std::cerr << "error: the two passwords differ\n";
      return kExitUsage;
    }
  }
  if (password.empty()) {
    std::cerr << "error: empty password\n";
    return kExitUsage;
  }
  try {
    std::cout << ui::hash_password(password) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

int run_ui(const std::string& config_path) {
  const auto config = load_config_or_report(config_path, ConfigUse::kDashboard);
  if (!config) return kExitUsage;
  setup_logging(config->log);

  // As in `run`: one thread takes the signals; every other thread has them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<ui::UiServer> server;
  try {
    server = start_dashboard(*config);
  } catch (const std::exception& e) {
    spdlog::error("{}", scrub_process_secrets(e.what()));
    spdlog::shutdown();
    return kExitFailure;
  }
  Config current = *config;
  while (true) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) {
      spdlog::info("{} received: stopping the dashboard", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      break;
    }
    try {
      Config next = load_config(config_path);
      add_database_secrets(next.database.url);
      for (const std::string& key : keys_needing_restart(current, next)) {
        spdlog::warn("reload: {} changed; it takes effect at the next restart", key);
      }
      server->apply(next.ui);
      setup_logging(next.log);
      current = reloadable_part(current, next);
      spdlog::info("configuration reloaded: {} dashboard user(s)", next.ui.users.size());
    } catch (const ConfigError& e) {
      for (const auto& problem : e.problems()) spdlog::error("reload rejected: {}", problem);
      spdlog::error("reload rejected: the previous configuration stays in force");
    }
  }
  server.reset();
  spdlog::shutdown();
  return kExitOk;
}

}  // namespace pgjobd
