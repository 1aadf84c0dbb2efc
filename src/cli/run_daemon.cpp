// `pgjobd run`: the daemon's life cycle and its signals.
//
// Signals are blocked in every thread (the mask is set before any thread starts and is
// inherited), and one thread takes them with sigwait: first SIGTERM/SIGINT drains, a
// second one ends the drain's wait at once (jobs are still released), SIGHUP reloads the
// configuration. Only those three are blocked and waited for; every other signal keeps
// its default action.

#include <pthread.h>
#include <signal.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.hpp"
#include "cli/config_loading.hpp"
#include "log/logging.hpp"
#include "log/secrets.hpp"
#include "pgjobd/engine.hpp"
#include "systemd/sd_notify.hpp"
#include "ui/ui_server.hpp"

namespace pgjobd {
namespace {

std::string running_status(const Config& config) {
  return "processing jobs: " + std::to_string(config.worker.concurrency) + " worker(s), " +
         std::to_string(config.handlers.size()) + " handler(s)";
}

// Exactly the signals the signal thread handles. Every other signal keeps its default
// action: blocking one here would have sigwait take it from whoever sent it (an outside
// SIGUSR2 once ended the signal thread, and with it SIGTERM and SIGHUP handling).
sigset_t daemon_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, sig);
  return set;
}

class ShutdownSignal {
 public:
  void trigger() {
    {
      std::lock_guard lock(mutex_);
      triggered_ = true;
    }
    cv_.notify_all();
  }
  bool triggered() {
    std::lock_guard lock(mutex_);
    return triggered_;
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return triggered_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool triggered_ = false;
};

// SIGHUP: re-read the file; apply what can change live; keep the old config in force when
// the new one is invalid.
// Returns the status line for systemd.
std::string reload_config(const std::string& path, Engine& engine,
                          const std::function<void(const Config&)>& applied) {
  spdlog::info("SIGHUP received: reloading {}", path);
  Config next;
  try {
    next = load_config(path);
    // A changed database.url needs a restart, but its password must not be logged meanwhile.
    add_database_secrets(next.database.url);
  } catch (const ConfigError& e) {
    for (const auto& problem : e.problems()) spdlog::error("reload rejected: {}", problem);
    spdlog::error("reload rejected: the previous configuration stays in force");
    engine.reload_rejected();
    return "reload rejected (invalid config); running with the previous one";
  }
  try {
    for (const auto& note : engine.reload(next)) spdlog::warn("{}", note);
  } catch (const std::exception& e) {
    spdlog::error("reload rejected: {}; the previous configuration stays in force", e.what());
    return "reload rejected; running with the previous config";
  }
  setup_logging(next.log);
  applied(next);
  spdlog::info("configuration reloaded: {} worker(s), {} handler(s)", next.worker.concurrency,
               next.handlers.size());
  return running_status(next);
}

}  // namespace

int run_daemon(const std::string& config_path) {
  const auto config = load_config_or_report(config_path);
  if (!config) return kExitUsage;
  setup_logging(config->log);

  // Before any thread starts: exec handlers must not inherit NOTIFY_SOCKET (a child
  // could otherwise report READY or STOPPING for us).
  SystemdNotifier systemd;
  SystemdNotifier::unset_environment();

  const sigset_t signals = daemon_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a handler's child closing its stdin must not kill us

  Engine engine(*config);
  ShutdownSignal shutdown;
  // The dashboard (ui.listen); the signal thread applies reloads to it, so it is reached
  // under a lock.
  std::mutex dashboard_mutex;
  std::unique_ptr<ui::UiServer> dashboard;
  const auto reload_dashboard = [&](const Config& next) {
    std::lock_guard lock(dashboard_mutex);
    if (dashboard) dashboard->apply(next.ui);
  };
  std::atomic<bool> finished{false};
  std::thread signal_thread([&] {
    int stops = 0;
    while (true) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (finished) return;
      if (sig == SIGHUP) {
        systemd.reloading("reloading " + config_path);
        // systemd keeps the unit "reloading" until READY=1, whatever the outcome.
        systemd.ready(reload_config(config_path, engine, reload_dashboard));
        continue;
      }
      ++stops;
      if (stops == 1) {
        spdlog::info("{} received: draining (send it again to stop waiting for running jobs)",
                     sig == SIGTERM ? "SIGTERM" : "SIGINT");
        systemd.stopping("draining: finishing running jobs");
        engine.request_stop();
        shutdown.trigger();
      } else {
        spdlog::warn("second signal: releasing running jobs now");
        engine.hurry();
      }
    }
  });
  // Wakes the signal thread with a signal it waits for, sent to it alone; it sees
  // `finished` and returns. (SIGINT rather than SIGTERM: the same here, but clang-tidy
  // reads pthread_kill(thread, SIGTERM) as terminating a thread.)
  const auto stop_signal_thread = [&] {
    finished = true;
    pthread_kill(signal_thread.native_handle(), SIGINT);
    signal_thread.join();
  };

  int code = kExitOk;
  try {
    systemd.status("starting: connecting to the database");
    // The dashboard before the engine: a port in use or a store that cannot be made stops
    // the daemon before it claims anything, and while the engine waits for an unreachable
    // database the dashboard already says so.
    if (!config->ui.listen.empty()) {
      std::unique_ptr<ui::UiServer> started = start_dashboard(*config);
      std::lock_guard lock(dashboard_mutex);
      dashboard = std::move(started);
    }
    engine.start();
    if (!shutdown.triggered()) systemd.ready(running_status(*config));
    // Pings keep coming through a drain; they stop only if the claim loop is wedged.
    systemd.start_watchdog([&] { return engine.responsive(); });
    shutdown.wait();
    {
      // The dashboard stops alongside the drain (it waits for its requests in progress);
      // the jthread joins however the drain ends.
      const std::jthread stop_dashboard([&] {
        std::lock_guard lock(dashboard_mutex);
        dashboard.reset();
      });
      engine.drain();
    }
    systemd.stop_watchdog();
    if (const int unwritten = engine.unwritten_completions(); unwritten > 0) {
      // Not a clean stop: a supervisor or script must not take it for one.
      spdlog::error(
          "exiting with code {}: {} completion(s) were not written; their jobs return to the "
          "queue when their leases expire",
          kExitFailure, unwritten);
      code = kExitFailure;
    }
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    code = kExitUsage;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    code = kExitFailure;
  }
  // However the block above ended, the engine and the dashboard stop here, while logging
  // still works: after an error their destructors would otherwise drain and log after
  // spdlog::shutdown() below, through a logger that is gone (a segfault, exit code 139).
  try {
    engine.drain();  // nothing to do after a normal drain
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    code = kExitFailure;
  }
  {
    std::lock_guard lock(dashboard_mutex);
    dashboard.reset();
  }
  stop_signal_thread();
  const bool stuck = engine.busy_workers() > 0;
  spdlog::shutdown();
  // Handler threads that ignored their stop request cannot be joined: leave without
  // running destructors under their feet (their jobs were already released).
  if (stuck) std::_Exit(code);
  return code;
}

}  // namespace pgjobd
