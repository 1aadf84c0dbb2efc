// `pgjobd run`: the daemon's life cycle and its signals.
//
// Signals are blocked in every thread (the mask is set before any thread starts and is
// inherited), and one thread takes them with sigwait: first SIGTERM/SIGINT drains, a
// second one ends the drain's wait at once (jobs are still released), SIGHUP reloads the
// configuration. Only those three are blocked and waited for; every other signal keeps
// its default action. The first SIGTERM/SIGINT also arms a hard bound: whatever the
// database does, the process ends within the drain's bound plus kShutdownMargin.

#include <pthread.h>
#include <signal.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.hpp"
#include "cli/config_loading.hpp"
#include "handlers/orphan_reaper.hpp"
#include "log/logging.hpp"
#include "log/secrets.hpp"
#include "pgjobd/duration.hpp"
#include "pgjobd/engine.hpp"
#include "runtime/scheduling.hpp"
#include "systemd/sd_notify.hpp"
#include "ui/ui_server.hpp"

namespace pgjobd {
namespace {

// Beyond Engine::drain_bound(), for what follows the last flush (stopping the HTTP
// endpoint and the dashboard) and for the drain's own database calls, each bounded by 1 s
// during a drain (Engine::drain): the loops' last calls, the leader's resignation and the
// daemon's row, and the call in flight at the flush deadline, about 5 s in all against a
// database that answers nothing.
constexpr Millis kShutdownMargin{10000};

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

// Where the daemon is, as systemd must hear it: READY=1 once start-up completed and to
// end each reload, never before start-up completed and never once a drain began. The
// signal thread reloads under the same lock, so a reload cannot interleave with the
// READY=1 of start-up or the STOPPING=1 of a drain.
class Lifecycle {
 public:
  enum class Phase { kStarting, kRunning, kStopping };

  explicit Lifecycle(SystemdNotifier& systemd) : systemd_(systemd) {}

  // Start-up completed: READY=1, unless a stop came first.
  void started(const std::string& status) {
    std::lock_guard lock(mutex_);
    if (phase_ != Phase::kStarting) return;
    phase_ = Phase::kRunning;
    systemd_.ready(status);
  }
  // The first stop signal: STOPPING=1.
  void stopping(const std::string& status) {
    std::lock_guard lock(mutex_);
    phase_ = Phase::kStopping;
    systemd_.stopping(status);
  }
  // Runs `reload` between RELOADING=1 and READY=1 (whatever its outcome: systemd stays
  // "reloading" until READY=1) when the daemon runs; otherwise sends nothing and returns
  // the phase that refused it.
  template <typename Reload>
  Phase reload(const std::string& status, Reload&& reload) {
    std::lock_guard lock(mutex_);
    if (phase_ != Phase::kRunning) return phase_;
    systemd_.reloading(status);
    systemd_.ready(reload());
    return phase_;
  }

 private:
  SystemdNotifier& systemd_;
  std::mutex mutex_;
  Phase phase_ = Phase::kStarting;
};

// The hard bound on a shutdown: armed by the first stop signal, it calls `expire` (which
// ends the process) if disarm() has not come within the bound. A drain waits on the
// database at several steps; each call has a deadline, but a wedged one must not keep an
// orchestrator's deploy waiting.
class ShutdownBound {
 public:
  ~ShutdownBound() { disarm(); }

  // Once; later calls do nothing.
  void arm(Millis bound, std::function<void()> expire) {
    std::lock_guard lock(mutex_);
    if (armed_ || disarmed_) return;
    armed_ = true;
    thread_ = std::thread([this, bound, expire = std::move(expire)] {
      std::unique_lock waiting(mutex_);
      // `expire` runs under the lock: a disarm() racing it waits for the process to end.
      if (!cv_.wait_for(waiting, bound, [this] { return disarmed_; })) expire();
    });
  }
  void disarm() {
    std::thread thread;
    {
      std::lock_guard lock(mutex_);
      disarmed_ = true;
      thread = std::move(thread_);
    }
    cv_.notify_all();
    if (thread.joinable()) thread.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool disarmed_ = false;
  std::thread thread_;
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
  const auto config = load_config_or_report(config_path, ConfigUse::kDaemon);
  if (!config) return kExitUsage;
  // Before any thread starts: each inherits the policy of the thread that starts it.
  const std::string scheduling_refused =
      config->worker.scheduling == "batch" ? enter_batch_scheduling() : "";
  setup_logging(config->log);
  if (!scheduling_refused.empty()) {
    spdlog::warn(
        "worker.scheduling: the kernel refused SCHED_BATCH ({}): the daemon keeps its "
        "scheduling policy",
        scheduling_refused);
  }

  // NOTIFY_SOCKET stays in the environment for libsystemd; exec handlers' children never
  // get it (handlers/exec_environment.cpp), so none can report READY or STOPPING for us.
  SystemdNotifier systemd;

  const sigset_t signals = daemon_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a handler's child closing its stdin must not kill us
  // Processes an exec job detaches from its process group come back to the daemon when
  // their parent exits, and end with their job (README "Exec handler").
  if (!OrphanReaper::instance().become_subreaper()) {
    spdlog::warn(
        "cannot become a child subreaper ({}): processes an exec job detaches with setsid or a "
        "double fork may outlive it",
        std::generic_category().message(errno));
  }

  Engine engine(*config);
  ShutdownSignal shutdown;
  Lifecycle lifecycle(systemd);
  // What the daemon waits for, named when the bound expires: start-up, the drain (whose
  // step the engine tells), or what follows it.
  std::atomic<const char*> waiting_for{"start-up: connecting to the database"};
  const auto expire = [&](Millis bound) {
    // Saying so must not become one more wait (a log pipe nobody reads, a lock held by a
    // thread stuck in the database): the process ends a second later regardless.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::_Exit(kExitShutdownBound);
    }).detach();
    std::string step = waiting_for.load();
    if (step == "drain") {
      const std::string stage = engine.drain_stage();
      step = stage == "drained" ? "the dashboard to stop" : "the drain: " + stage;
    }
    spdlog::error(
        "shutdown did not end within {} of the first stop signal (shutdown.timeout, the "
        "handlers' kill_grace + 1s, the completion flush and {} margin): still waiting for "
        "{}; exiting with code {} now; {} job(s) still running and any unwritten completions "
        "return to the queue when their leases expire",
        format_duration(bound), format_duration(kShutdownMargin), step, kExitShutdownBound,
        engine.busy_workers());
    systemd.status("gave up on the drain after " + format_duration(bound) + ": still waiting for " +
                   step);
    spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& logger) { logger->flush(); });
    // Threads stuck in the database hold the engine's locks: no destructor may run.
    std::_Exit(kExitShutdownBound);
  };
  ShutdownBound shutdown_bound;  // after `expire`, which its thread calls
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
        const auto phase = lifecycle.reload("reloading " + config_path, [&] {
          return reload_config(config_path, engine, reload_dashboard);
        });
        if (phase != Lifecycle::Phase::kRunning) {
          spdlog::warn("SIGHUP ignored: the daemon is {}; the configuration is not reloaded",
                       phase == Lifecycle::Phase::kStarting ? "starting (send it again once it "
                                                              "runs)"
                                                            : "draining");
        }
        continue;
      }
      ++stops;
      if (stops == 1) {
        const Millis bound = engine.drain_bound() + kShutdownMargin;
        shutdown_bound.arm(bound, [&expire, bound] { expire(bound); });
        spdlog::info(
            "{} received: draining (send it again to stop waiting for running jobs); the "
            "process ends within {} whatever the database does",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", format_duration(bound));
        lifecycle.stopping("draining: finishing running jobs");
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
    lifecycle.started(running_status(*config));
    // Pings keep coming through a drain; they stop only if the claim loop is wedged. The
    // thread ends with this block, however it ends, before the engine goes.
    const ScopedWatchdog watchdog(systemd, [&] { return engine.responsive(); });
    shutdown.wait();
    waiting_for = "drain";
    {
      // The dashboard stops alongside the drain (it waits for its requests in progress);
      // the jthread joins however the drain ends.
      const std::jthread stop_dashboard([&] {
        std::lock_guard lock(dashboard_mutex);
        dashboard.reset();
      });
      engine.drain();
    }
    waiting_for = "the dashboard and the signal thread to stop";
    if (const int unwritten = engine.unwritten_completions(); unwritten > 0) {
      // Not a clean stop: a supervisor or script must not take it for one, and the code
      // says how many were lost.
      code = kExitUnwrittenBase + std::min(unwritten, kExitUnwrittenCap);
      spdlog::error(
          "exiting with code {}: {} completion(s) were not written; their jobs return to the "
          "queue when their leases expire",
          code, unwritten);
      systemd.status(std::to_string(unwritten) + " completion(s) not written; exit code " +
                     std::to_string(code));
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
  shutdown_bound.disarm();
  const bool stuck = engine.busy_workers() > 0;
  spdlog::shutdown();
  // Handler threads that ignored their stop request cannot be joined: leave without
  // running destructors under their feet (their jobs were already released).
  if (stuck) std::_Exit(code);
  return code;
}

}  // namespace pgjobd
