// Engine: wires config, handlers, pool, fetcher, completer, listener, maintenance and the
// HTTP endpoint together, and runs the drain sequence.

#include "pgjobd/engine.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <random>

#include "config/config_reload.hpp"
#include "db/pg_database.hpp"
#include "engine/claim_signal.hpp"
#include "engine/completer.hpp"
#include "engine/engine_factory.hpp"
#include "engine/fetcher.hpp"
#include "engine/finished_notifier.hpp"
#include "engine/health.hpp"
#include "engine/job_runner.hpp"
#include "engine/lease_guard.hpp"
#include "engine/lease_renewer.hpp"
#include "engine/maintenance.hpp"
#include "engine/notify_listener.hpp"
#include "engine/worker_pool.hpp"
#include "handlers/handler_factory.hpp"
#include "http/http_server.hpp"
#include "log/conninfo_display.hpp"
#include "log/secrets.hpp"
#include "metrics/metrics.hpp"
#include "schedule/scheduler.hpp"
#include "store/reconnect_backoff.hpp"

extern char** environ;

namespace pgjobd {

using Clock = std::chrono::steady_clock;

namespace {

// The longest a claim, heartbeat or completion may wait for its answer before /readyz says
// so (or database.call_timeout, when shorter). Seconds: a healthy call takes milliseconds,
// a loaded server's slowest some hundreds.
constexpr Millis kStallAfter{5000};

// The longest any database call of a drain waits for its answer (Database::shorten_calls).
constexpr Millis kDrainCallBound{1000};

std::string make_worker_id() {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  std::mt19937 generator{std::random_device{}()};
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%04x", static_cast<unsigned>(generator() & 0xffff));
  return std::string(host) + ":" + std::to_string(getpid()) + ":" + suffix;
}

std::vector<std::string> keys_of(const auto& map) {
  std::vector<std::string> keys;
  keys.reserve(map.size());
  for (const auto& [key, value] : map) keys.push_back(key);
  return keys;
}

// worker.max_result_bytes, validated ≥ 0.
std::size_t max_result_bytes(const Config& config) {
  return static_cast<std::size_t>(config.worker.max_result_bytes);
}

}  // namespace

class Engine::Impl {
 public:
  Impl(Config config, std::shared_ptr<Database> database, const EngineTimings& timings)
      : config_(std::move(config)),
        timings_(timings),
        worker_id_(make_worker_id()),
        database_(std::move(database)),
        child_credentials_(credentials_to_withhold(config_.database.url, environ)) {
    // database.* needs a restart, so these are the credentials for the engine's lifetime.
    add_database_secrets(config_.database.url);
  }

  ~Impl() { drain(); }

  void register_handler(const std::string& type, Handler handler) {
    if (started_) throw std::logic_error("register_handler after start");
    registered_[type] = std::move(handler);
  }

  void start();
  void drain();
  std::vector<std::string> reload(const Config& next);
  void reload_rejected() {
    if (metrics_) metrics_->config_reload(false);
  }
  Config current_config() const {
    std::lock_guard lock(config_mutex_);
    return config_;
  }
  void hurry() {
    hurried_ = true;
    stop_requested_ = true;
    std::lock_guard lock(parts_mutex_);
    if (pool_) pool_->interrupt_wait();
  }
  void wake() { claim_signal_->wake(); }
  int http_port() const { return http_ ? http_->port() : 0; }
  const std::string& worker_id() const { return worker_id_; }
  int unwritten_completions() const { return unwritten_completions_.load(); }
  int busy() const {
    std::lock_guard lock(parts_mutex_);
    return pool_ ? pool_->working() : stuck_jobs_.load();
  }
  void request_stop() { stop_requested_ = true; }
  std::string drain_stage() const { return drain_stage_.load(); }
  Millis drain_bound() const {
    const Config config = current_config();
    return config.shutdown.timeout + release_grace() + flush_window(config);
  }
  bool responsive() const { return liveness_problem().empty(); }
  // Empty while alive; else what is wedged (/healthz's 503 body).
  std::string liveness_problem() const {
    // Every call that claims, renews or completes ends by its deadline
    // (database.call_timeout); one still in flight well past it is a wedged loop.
    std::string wedged = health_.wedged(call_timeout_ + timings_.watchdog_slack / 6);
    if (!wedged.empty()) return wedged;
    std::lock_guard lock(parts_mutex_);
    if (!fetcher_ || drained_) return "";  // starting or drained: nothing to be stuck in
    // The loop wakes at least every poll.max_interval (and every progress slice while the
    // pool is full); a claim that hangs far longer is a wedged connection. A database
    // outage is not: the loop retries, and progresses.
    const auto limit = fetcher_->max_interval() + timings_.watchdog_slack;
    if (Clock::now() - fetcher_->last_progress() < limit) return "";
    return "fetcher: the claim loop has made no progress for " +
           format_duration(
               std::chrono::duration_cast<Millis>(Clock::now() - fetcher_->last_progress()));
  }

 private:
  HandlerTable build_handlers(const Config& config) const;
  void prepare_schema();
  Millis release_grace() const;
  // How long the drain's last completion flush may take.
  static Millis flush_window(const Config& config) {
    return std::min<Millis>(config.lease.duration, Millis(10000));
  }

  // Changed only by reload(); threads other than the caller's read it via current_config().
  Config config_;
  mutable std::mutex config_mutex_;
  const EngineTimings timings_;
  const Millis call_timeout_ = effective_call_timeout(config_);
  // Serialises start(), drain() and reload(), which build and tear down the parts below.
  std::mutex lifecycle_mutex_;
  const std::string worker_id_;
  const std::shared_ptr<Database> database_;
  // Taken from the environment here, before any thread starts; read-only afterwards.
  const WithheldCredentials child_credentials_;
  const std::shared_ptr<ClaimSignal> claim_signal_ = std::make_shared<ClaimSignal>();
  HandlerTable registered_;
  HandlerTable handlers_;
  Health health_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> hurried_{false};
  std::atomic<int> stuck_jobs_{0};             // handlers that ignored a stop request at drain
  std::atomic<int> unwritten_completions_{0};  // given up on at drain's flush deadline
  // What drain() is doing now, for the log line of a daemon that gives up on its drain.
  std::atomic<const char*> drain_stage_{""};
  // Guards the pointers below and drained_ (not the parts themselves) for callers on
  // other threads: hurry(), busy(), responsive().
  mutable std::mutex parts_mutex_;
  bool drained_ = false;

  // Read by the fetcher, written by the maintenance loop: declared before (so destroyed
  // after) both.
  std::unique_ptr<LimitRegistry> limits_;
  // Construction order is start-up order; drain() stops them in the reverse order.
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<HttpServer> http_;
  // Before the completer and the workers, which call into it: destroyed after them.
  std::unique_ptr<FinishedNotifier> finished_notifier_;
  std::unique_ptr<Completer> completer_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<Fetcher> fetcher_;
  std::unique_ptr<Maintenance> maintenance_;
  std::unique_ptr<LeaseRenewer> lease_renewer_;
  // After the maintenance and the lease renewer, which notifications wake: destroyed
  // before them.
  std::unique_ptr<NotifyListener> listener_;
  std::unique_ptr<LeaseGuard> lease_guard_;
  std::unique_ptr<schedule::Scheduler> scheduler_;
};

HandlerTable Engine::Impl::build_handlers(const Config& config) const {
  HandlerTable handlers;
  for (const auto& [type, handler_config] : config.handlers) {
    // database_, never config.database: a reload that changes database.* (restart-only)
    // must not point sql handlers at a database the rest of the engine does not use.
    handlers[type] = make_handler(
        type, handler_config,
        {{database_, worker_id_, config.retention.done.count() == 0, max_result_bytes(config)},
         child_credentials_,
         max_result_bytes(config),
         config.worker.concurrency});
  }
  for (const auto& [type, handler] : registered_) handlers[type] = handler;
  if (handlers.empty()) {
    throw std::invalid_argument("no handlers configured: add at least one under `handlers:`");
  }
  return handlers;
}

// Waits for the database (a daemon often starts before it), then checks or applies the
// schema. Returns early if a stop was requested meanwhile.
void Engine::Impl::prepare_schema() {
  ReconnectBackoff backoff;
  while (!stop_requested_) {
    try {
      const SchemaReport report = database_->prepare_schema(
          config_.database.migrate_on_start, [this] { return stop_requested_.load(); });
      if (report.stopped) return;  // SIGTERM while another session held the migration lock
      if (report.to_version != report.from_version) {
        spdlog::info("migrated schema {} from version {} to {}", config_.database.schema,
                     report.from_version, report.to_version);
      }
      if (!report.problem.empty()) throw std::runtime_error(report.problem);
      return;
    } catch (const DbError& e) {
      if (!e.connection_lost()) throw;
      const auto wait = backoff.next();
      spdlog::warn("database not reachable (attempt {}), retrying in {}ms: {}", backoff.failures(),
                   wait.count(), e.what());
      // /readyz says why the daemon is not ready yet (DbError messages carry no password).
      health_.set_problem("engine", std::string("starting: database not reachable: ") + e.what());
      const auto until = Clock::now() + wait;
      while (!stop_requested_ && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
}

void Engine::Impl::start() {
  if (started_.exchange(true)) throw std::logic_error("Engine::start called twice");
  std::lock_guard lifecycle(lifecycle_mutex_);
  handlers_ = build_handlers(config_);
  spdlog::info("pgjobd starting as {} on {} (schema {}), {} worker(s), queues [{}], types [{}]",
               worker_id_, describe_conninfo(config_.database.url), config_.database.schema,
               config_.worker.concurrency, fmt::join(keys_of(config_.worker.queues), ", "),
               fmt::join(keys_of(handlers_), ", "));

  metrics_ = std::make_unique<Metrics>(keys_of(config_.worker.queues), keys_of(handlers_));
  metrics_->set_workers_max(config_.worker.concurrency);
  health_.set_problem("engine", "starting");
  // A claim, heartbeat or completion left without an answer this long makes the daemon
  // not ready, long before its deadline ends it: an orchestrator stops sending work to a
  // daemon whose database stopped answering within seconds.
  health_.set_stall_after(std::min<Millis>(call_timeout_, kStallAfter));
  if (!config_.metrics.listen.empty()) {
    http_ = std::make_unique<HttpServer>(
        config_.metrics.listen, metrics_->collectable(), [this] { return health_.problems(); },
        [this] { return liveness_problem(); });
    spdlog::info("serving /metrics, /healthz and /readyz on port {}", http_->port());
  }
  prepare_schema();
  if (stop_requested_) return;
  // The claim session connects while the other parts are wired and started (their threads
  // take tens of milliseconds on a small VM): the first claim waited for all of that and
  // then for its own connection (bench/README, Peers: "Start-up").
  std::unique_ptr<ClaimStore> claim_store = database_->open_store("fetcher", StoreUse::kHotPath);
  claim_store->connect_ahead();

  // Parts are wired first, then started so that whatever a part calls into runs before it
  // (the completer before the pool that feeds it, the lease renewer before the lease guard
  // that stops the jobs it could not renew); drain() stops each part before what it calls into. The
  // pool holds jobs from its construction on, so its threads start after the first claim: 64 of
  // them take 20-30 ms on a small VM, and made beside the first claim they took CPU from it and
  // from its backend (4 ms of 59; bench/README, "Start-up, sixth round"); the jobs it claimed wait
  // for the first thread, made at once after it.
  completer_ = std::make_unique<Completer>(database_->open_store("completer", StoreUse::kHotPath),
                                           worker_id_, config_.retention.done.count() == 0,
                                           *metrics_, health_);
  completer_->set_on_retries_written([signal = claim_signal_](Millis shortest_delay) {
    signal->due_at(std::chrono::steady_clock::now() + shortest_delay);
  });
  completer_->set_on_written([signal = claim_signal_] { signal->completions_written(); });
  completer_->set_on_due([signal = claim_signal_](const std::vector<std::int64_t>& unblocked,
                                                  bool other_due, int notify_pid) {
    signal->ignored_notify_pid.store(notify_pid, std::memory_order_relaxed);
    // As the NOTIFY this stands for would (the trigger's, which other INSERTs may rely on).
    if (other_due) signal->wake_for_insert();
    signal->jobs_unblocked(unblocked);
  });
  // Its session connects on its first announcement.
  finished_notifier_ = std::make_unique<FinishedNotifier>(
      database_->open_store("finished notifier", StoreUse::kOccasional), config_.database.schema,
      *metrics_);
  finished_notifier_->set_enabled(config_.worker.notify_finished);
  completer_->set_on_settled([notifier = finished_notifier_.get()](
                                 const std::vector<Completion>& batch, std::size_t settled,
                                 const std::vector<JobAttempt>& held) {
    notifier->completions_written(batch, settled, held);
  });
  limits_ = std::make_unique<LimitRegistry>(config_.limits, worker_id_);
  limits_->set_on_lifted([signal = claim_signal_] { signal->slot_freed(); });
  runner_ =
      std::make_unique<JobRunner>(config_.retry, handlers_, *metrics_, max_result_bytes(config_));
  // The workers' callbacks hold plain pointers, not `this`: a handler that ignored its
  // stop request at drain may return after the engine is gone (see drain()).
  auto pool = std::make_unique<WorkerPool>(
      config_.worker,
      [runner = runner_.get(), notifier = finished_notifier_.get()](
          const Job& job, const JobStop& stop, const JobFinish& finish) {
        JobStarted started = runner->start(job, stop, finish);
        // None: the handler committed its job's end itself (the sql handler), which the
        // completer never sees. (Or found the job no longer ours: announced all the same,
        // as a waiter reads the job's status.) A job handed over (http) always ends with a
        // completion.
        if (!started.handed_off && !started.completion) notifier->job_ended(job.id);
        return started;
      },
      [runner = runner_.get()](const Job& job) { return runner->hands_off(job); },
      [completer = completer_.get()](Completion completion) {
        completer->submit(std::move(completion));
      },
      [metrics = metrics_.get(), signal = claim_signal_](int working_now, bool for_fetcher) {
        metrics->set_workers_busy(working_now);
        if (for_fetcher) signal->slot_freed();
      });
  completer_->set_in_hand([pool = pool.get()] { return pool->busy(); });
  auto fetcher = std::make_unique<Fetcher>(
      Fetcher::Options{worker_id_, config_.lease.duration, config_.poll, keys_of(handlers_),
                       config_.worker.max_payload_bytes, timings_.progress_slice, limits_.get()},
      std::move(claim_store), *pool, *claim_signal_, *metrics_, health_);
  {
    std::lock_guard lock(parts_mutex_);
    pool_ = std::move(pool);
    fetcher_ = std::move(fetcher);
  }
  maintenance_ = std::make_unique<Maintenance>(config_, worker_id_, *database_, *pool_, *metrics_,
                                               health_, limits_.get());
  lease_renewer_ = std::make_unique<LeaseRenewer>(
      config_.lease.duration, worker_id_, database_->open_store("heartbeat", StoreUse::kOccasional),
      *pool_, *metrics_, health_,
      [completer = completer_.get()] { return completer->queued_jobs(); });
  // A daemon with a `limits:` section writes it before its first claim (README "Limits").
  // One without has nothing to write: its fetcher reads the definitions on the claim
  // session before its first claim, so that claim does not wait for another connection
  // (LimitRegistry::read_before_first_claim).
  if (config_.limits) maintenance_->prepare_limits();
  // A transaction pooler cannot keep a LISTEN session: without database.listen_url the
  // daemon polls (poll.max_interval) and learns of cancels at its heartbeats.
  const bool listen_through_pooler =
      config_.database.pooler == "transaction" && config_.database.listen_url.empty();
  if (config_.poll.listen_notify && listen_through_pooler) {
    spdlog::warn(
        "database.pooler is transaction and database.listen_url is not set: no LISTEN, new jobs "
        "are found by polling (poll.max_interval) and cancels at the next heartbeat");
  }
  if (config_.poll.listen_notify && !listen_through_pooler) {
    listener_ = std::make_unique<NotifyListener>(
        *database_,
        [signal = claim_signal_](int notify_pid) {
          // The completer's own NOTIFY: it said after that write what became due (set_on_due).
          if (notify_pid != 0 &&
              notify_pid == signal->ignored_notify_pid.load(std::memory_order_relaxed)) {
            return;
          }
          // A new LISTEN session (0), after a failover maybe: the completer's process is the
          // old server's until its next write says otherwise, and another's there.
          if (notify_pid == 0) signal->ignored_notify_pid.store(0, std::memory_order_relaxed);
          signal->wake_for_insert();
        },
        [renewer = lease_renewer_.get()] { renewer->request_heartbeat(); }, *metrics_,
        [maintenance = maintenance_.get()] { maintenance->request_limits_sync(); });
  }
  lease_guard_ = std::make_unique<LeaseGuard>(
      *pool_, config_.lease.duration, std::min<Millis>(config_.lease.duration / 10, Millis(2000)));

  // Every daemon runs a scheduler, configured schedules or not: schedules made with SQL
  // fire too, and the table's compare-and-set, not leadership, decides who fires a tick.
  scheduler_ = std::make_unique<schedule::Scheduler>(
      database_->open_schedule_store("scheduler"), metrics_.get(),
      schedule::SchedulerSettings{timings_.schedule_refresh, Millis(2000)});
  scheduler_->set_yaml(config_.schedules);

  finished_notifier_->start();
  completer_->start();
  fetcher_->start();
  // The pool's threads and the parts with sessions of their own start once the first
  // claim is made (or after timings_.first_claim_head_start): three backends starting
  // beside it on a two-core machine made the first claim 10-15 ms later (bench/README,
  // "Start-up, fifth round"). Nothing waits for them meanwhile: the listener wakes the
  // fetcher once it listens, so a job inserted before then is claimed at once; heartbeats,
  // rescues and schedule ticks are seconds apart. (The completer connects on its first
  // write.)
  fetcher_->wait_first_claim(Clock::now() + timings_.first_claim_head_start);
  pool_->start();
  lease_renewer_->start();
  maintenance_->start();
  lease_guard_->start();
  if (listener_) listener_->start();
  scheduler_->start();
  health_.clear("engine");
  spdlog::info("pgjobd ready");
}

std::vector<std::string> Engine::Impl::reload(const Config& next) {
  // Never wait here: start() may be waiting for the database for a long time.
  std::unique_lock lifecycle(lifecycle_mutex_, std::try_to_lock);
  if (!lifecycle.owns_lock() || !fetcher_ || drained_) {
    throw std::logic_error("the daemon is starting or draining; reload again once it runs");
  }
  // Which keys a reload applies is declared once, in src/config/config_keys.cpp: the
  // restart-only ones keep their current values in `applied`, so handlers, too, see the
  // database the rest of the daemon uses.
  const Config current = current_config();
  const Config applied = reloadable_part(current, next);
  // Building the handlers is the one step that can fail: do it before changing anything.
  HandlerTable handlers;
  try {
    handlers = build_handlers(applied);
  } catch (const std::exception&) {
    metrics_->config_reload(false);
    throw;
  }
  std::vector<std::string> needs_restart;
  for (const std::string& key : keys_needing_restart(current, next)) {
    needs_restart.push_back(key + " changed: restart pgjobd to apply it");
  }

  // Narrow the claimed types first and widen them last, so a claimed job always finds
  // its handler.
  std::vector<std::string> kept_types;
  for (const auto& [type, handler] : handlers_) {
    if (handlers.count(type)) kept_types.push_back(type);
  }
  fetcher_->reconfigure(applied.poll, kept_types);
  runner_->reconfigure(applied.retry, handlers, max_result_bytes(applied));
  fetcher_->reconfigure(applied.poll, keys_of(handlers));
  fetcher_->set_max_payload_bytes(applied.worker.max_payload_bytes);
  {
    std::lock_guard lock(parts_mutex_);
    pool_->resize(applied.worker);
  }
  metrics_->set_workers_max(applied.worker.concurrency);
  // Metrics first: a statistics round still in flight with the old queues then finds the
  // dropped ones unserved, and their series stay gone.
  metrics_->set_served(keys_of(applied.worker.queues), keys_of(handlers));
  maintenance_->set_queues(keys_of(applied.worker.queues));
  maintenance_->set_retention(applied.retention);
  maintenance_->set_handlers(applied.handlers);
  completer_->set_delete_done(applied.retention.done.count() == 0);
  finished_notifier_->set_enabled(applied.worker.notify_finished);
  scheduler_->set_yaml(applied.schedules);  // reconciled by the scheduler's thread
  if (applied.limits != current.limits) {
    limits_->set_configured(applied.limits);  // written by the maintenance loop
    maintenance_->request_limits_sync();
  }
  {
    std::lock_guard lock(config_mutex_);
    config_ = applied;
  }
  handlers_ = std::move(handlers);
  metrics_->config_reload(true);
  return needs_restart;
}

Millis Engine::Impl::release_grace() const {
  Millis grace(0);
  for (const auto& [type, handler] : current_config().handlers) {
    grace = std::max(grace, handler.kill_grace);
  }
  return grace + Millis(1000);
}

void Engine::Impl::drain() {
  std::lock_guard lifecycle(lifecycle_mutex_);
  if (drained_ || !started_) return;
  {
    std::lock_guard lock(parts_mutex_);
    drained_ = true;
  }
  stop_requested_ = true;
  health_.set_problem("engine", "draining");
  if (!fetcher_) {  // start() was interrupted before the engine ran
    http_.reset();
    return;
  }
  const Config config = current_config();
  spdlog::info("draining: no new jobs; waiting up to {} for {} running job(s)",
               format_duration(config.shutdown.timeout), pool_->busy());
  // From here on no database call waits longer than kDrainCallBound (an sql handler's own
  // statement excepted: its job may still finish): a database that stopped answering must
  // not stretch the drain by a whole database.call_timeout at each step. A healthy one
  // answers the drain's few calls in milliseconds.
  database_->shorten_calls(kDrainCallBound);
  // Soft stop: nothing new is claimed; running jobs go on. The loops are asked together,
  // so their last calls end together.
  drain_stage_ = "stopping the claim, LISTEN and schedule loops";
  if (listener_) listener_->request_stop();
  fetcher_->request_stop();
  scheduler_->request_stop();  // no new ticks: the other daemons, or the next start, fire them
  if (listener_) listener_->join();
  fetcher_->join();
  scheduler_->join();
  // Jobs held for a thread (worker.prefetch) have not started: back to the queue now, for
  // the other daemons, rather than run during the drain.
  const std::vector<JobAttempt> unstarted = pool_->release_queued();
  for (const JobAttempt& job : unstarted) {
    completer_->submit({job, Outcome::kReleased, {}, Millis(0)});
  }
  if (!unstarted.empty()) {
    spdlog::info("released {} claimed job(s) no worker had started", unstarted.size());
  }

  drain_stage_ = "waiting for running jobs";
  bool idle = pool_->wait_idle(Clock::now() + config.shutdown.timeout);
  if (!idle) {
    // Hard stop: ask the handlers to stop; their jobs return to the queue.
    spdlog::warn("stopping {} job(s) still running{}; they return to the queue", pool_->busy(),
                 hurried_ ? " (second signal)" : " after the shutdown timeout");
    pool_->stop_all_jobs();
    drain_stage_ = "stopping running jobs";
    // Not interruptible: exec children get their TERM-then-KILL grace either way.
    idle = pool_->wait_idle(Clock::now() + release_grace(), /*interruptible=*/false);
  }
  bool stuck = false;
  if (!idle) {
    // Handlers that ignore their stop token: release their jobs ourselves. If one finishes
    // later its completion is fenced off (the attempt is no longer running).
    stuck = true;
    for (const JobAttempt& job : pool_->running()) {
      completer_->submit({job, Outcome::kReleased, {}, Millis(0)});
    }
    spdlog::error("{} handler(s) ignored the stop request; their jobs were released",
                  pool_->busy());
  }
  drain_stage_ = "stopping the heartbeats and the maintenance loop";
  lease_guard_->stop();  // it stops pool jobs
  // Both heartbeat or report on the running jobs: stopped before the pool goes.
  lease_renewer_->request_stop();
  maintenance_->request_stop();
  lease_renewer_->join();
  maintenance_->join();
  if (stuck) {
    std::lock_guard lock(parts_mutex_);
    stuck_jobs_ = pool_->busy();
    // Their threads cannot be joined, and they still reach the runner, completer, metrics
    // and claim signal when they return: keep all of those alive (the signal is shared
    // with the pool's callback). The process exits next.
    (void)pool_.release();
    (void)runner_.release();
    (void)metrics_.release();
  } else {
    pool_->stop();  // joins the workers: after this no thread calls into the completer
  }
  drain_stage_ = "writing the last completions";
  completer_->set_flush_deadline(Clock::now() + flush_window(config));
  completer_->stop();
  unwritten_completions_ = completer_->unwritten_at_stop();
  // After the completer, whose last batches it announces.
  finished_notifier_->stop();
  if (stuck) {
    (void)completer_.release();
    (void)finished_notifier_.release();  // the stuck workers' sql handlers may still call it
  }
  drain_stage_ = "stopping the HTTP endpoint";
  http_.reset();
  drain_stage_ = "drained";
  if (unwritten_completions_ > 0) {
    spdlog::error(
        "drained, but {} completion(s) were not written; their jobs return to the queue when "
        "their leases expire",
        unwritten_completions_.load());
  } else {
    spdlog::info("drained");
  }
}

namespace {
// The database settings the engine's sessions use: call_timeout resolved from the lease.
DatabaseConfig engine_database(const Config& config) {
  DatabaseConfig database = config.database;
  database.call_timeout = effective_call_timeout(config);
  return database;
}
}  // namespace

Engine::Engine(const Config& config)
    : Engine(make_engine(config, std::make_shared<PgDatabase>(engine_database(config)))) {}
Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Engine make_engine(Config config, std::shared_ptr<Database> database) {
  return make_engine(std::move(config), std::move(database), EngineTimings{});
}
Engine make_engine(Config config, std::shared_ptr<Database> database,
                   const EngineTimings& timings) {
  return Engine(std::make_unique<Engine::Impl>(std::move(config), std::move(database), timings));
}
void Engine::register_handler(const std::string& type, Handler handler) {
  impl_->register_handler(type, std::move(handler));
}
void Engine::start() { impl_->start(); }
void Engine::drain() { impl_->drain(); }
std::vector<std::string> Engine::reload(const Config& config) { return impl_->reload(config); }
void Engine::reload_rejected() { impl_->reload_rejected(); }
void Engine::request_stop() { impl_->request_stop(); }
void Engine::hurry() { impl_->hurry(); }
void Engine::wake() { impl_->wake(); }
int Engine::http_port() const { return impl_->http_port(); }
const std::string& Engine::worker_id() const { return impl_->worker_id(); }
int Engine::busy_workers() const { return impl_->busy(); }
int Engine::unwritten_completions() const { return impl_->unwritten_completions(); }
bool Engine::responsive() const { return impl_->responsive(); }
std::chrono::milliseconds Engine::drain_bound() const { return impl_->drain_bound(); }
std::string Engine::drain_stage() const { return impl_->drain_stage(); }

}  // namespace pgjobd
