// Engine: wires config, handlers, pool, fetcher, completer, listener, maintenance and the
// HTTP endpoint together, and runs the drain sequence.

#include "pgjobd/engine.hpp"

#include <unistd.h>
#include <pqxx/pqxx>

#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <random>

#include "db/connection.hpp"
#include "db/job_store.hpp"
#include "db/migrator.hpp"
#include "engine/completer.hpp"
#include "engine/fetcher.hpp"
#include "engine/health.hpp"
#include "engine/job_runner.hpp"
#include "engine/lease_guard.hpp"
#include "engine/maintenance.hpp"
#include "engine/notify_listener.hpp"
#include "engine/worker_pool.hpp"
#include "handlers/handler_factory.hpp"
#include "http/http_server.hpp"
#include "log/logging.hpp"
#include "metrics/metrics.hpp"

namespace pgjobd {

using Clock = std::chrono::steady_clock;

namespace {

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
  for (const auto& [key, value] : map) keys.push_back(key);
  return keys;
}

}  // namespace

class Engine::Impl {
 public:
  explicit Impl(Config config) : config_(std::move(config)), worker_id_(make_worker_id()) {}

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
    std::lock_guard lock(pool_mutex_);
    if (pool_) pool_->interrupt_wait();
  }
  void wake() {
    if (Fetcher* fetcher = fetcher_ptr_.load()) fetcher->wake();
  }
  int http_port() const { return http_ ? http_->port() : 0; }
  const std::string& worker_id() const { return worker_id_; }
  int busy() const {
    std::lock_guard lock(pool_mutex_);
    return pool_ ? pool_->busy() : stuck_jobs_.load();
  }
  void request_stop() { stop_requested_ = true; }
  bool responsive() const {
    const Fetcher* fetcher = fetcher_ptr_.load();
    if (fetcher == nullptr) return true;  // starting or drained: nothing to be stuck in
    // The loop wakes at least every poll.max_interval; a claim that hangs far longer is a
    // wedged connection. A database outage is not: the loop retries, and progresses.
    const auto limit = fetcher->max_interval() + std::chrono::seconds(60);
    return Clock::now() - fetcher->last_progress() < limit;
  }

 private:
  HandlerTable build_handlers(const Config& config) const;
  void prepare_schema();
  Millis release_grace() const;

  // Changed only by reload(); threads other than the caller's read it via current_config().
  Config config_;
  mutable std::mutex config_mutex_;
  // Serialises start(), drain() and reload(), which build and tear down the parts below.
  std::mutex lifecycle_mutex_;
  const std::string worker_id_;
  HandlerTable registered_;
  HandlerTable handlers_;
  Health health_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> hurried_{false};
  std::atomic<Fetcher*> fetcher_ptr_{nullptr};
  bool drained_ = false;
  std::atomic<int> stuck_jobs_{0};
  // Guards pool_ itself (not the pool) for callers on other threads: hurry(), busy().
  mutable std::mutex pool_mutex_;  // handlers that ignored a stop request at drain

  // Construction order is start-up order; each part is stopped explicitly in drain().
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<Completer> completer_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<Fetcher> fetcher_;
  std::unique_ptr<NotifyListener> listener_;
  std::unique_ptr<Maintenance> maintenance_;
  std::unique_ptr<LeaseGuard> lease_guard_;
};

HandlerTable Engine::Impl::build_handlers(const Config& config) const {
  HandlerTable handlers;
  for (const auto& [type, handler_config] : config.handlers) {
    handlers[type] = make_handler(
        type, handler_config, {config.database, worker_id_, config.retention.done.count() == 0});
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
      auto conn = open_connection(config_.database, "startup");
      if (config_.database.migrate_on_start) {
        const auto report = migrate(*conn, config_.database.schema);
        if (report.to_version != report.from_version) {
          spdlog::info("migrated schema {} from version {} to {}", config_.database.schema,
                       report.from_version, report.to_version);
        }
      }
      const std::string problem = schema_problem(*conn, config_.database.schema);
      if (!problem.empty()) throw std::runtime_error(problem);
      return;
    } catch (const pqxx::broken_connection& e) {
      const auto wait = backoff.next();
      spdlog::warn("database not reachable (attempt {}), retrying in {}ms: {}", backoff.failures(),
                   wait.count(), mask_password(e.what()));
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
               worker_id_, mask_password(config_.database.url), config_.database.schema,
               config_.worker.concurrency, fmt::join(keys_of(config_.worker.queues), ", "),
               fmt::join(keys_of(handlers_), ", "));

  metrics_ = std::make_unique<Metrics>(keys_of(config_.worker.queues), keys_of(handlers_));
  metrics_->set_workers_max(config_.worker.concurrency);
  health_.set_problem("engine", "starting");
  if (!config_.metrics.listen.empty()) {
    http_ = std::make_unique<HttpServer>(config_.metrics.listen, metrics_->registry(),
                                         [this] { return health_.problems(); });
    spdlog::info("serving /metrics, /healthz and /readyz on port {}", http_->port());
  }
  prepare_schema();
  if (stop_requested_) return;

  completer_ = std::make_unique<Completer>(config_.database, worker_id_,
                                           config_.retention.done.count() == 0, *metrics_, health_);
  runner_ = std::make_unique<JobRunner>(config_.retry, handlers_, *metrics_);
  auto pool = std::make_unique<WorkerPool>(
      config_.worker,
      [this](const Job& job, std::stop_token stop) { return runner_->run(job, std::move(stop)); },
      [this](Completion completion) { completer_->submit(std::move(completion)); },
      [this](int busy_now) {
        metrics_->set_workers_busy(busy_now);
        if (Fetcher* fetcher = fetcher_ptr_.load()) fetcher->slot_freed();
      });
  {
    std::lock_guard lock(pool_mutex_);
    pool_ = std::move(pool);
  }
  fetcher_ = std::make_unique<Fetcher>(config_, keys_of(handlers_), worker_id_, *pool_, *metrics_,
                                       health_);
  fetcher_ptr_ = fetcher_.get();
  if (config_.poll.listen_notify) {
    listener_ = std::make_unique<NotifyListener>(
        config_.database, [this] { wake(); }, *metrics_);
  }
  maintenance_ =
      std::make_unique<Maintenance>(config_, worker_id_, *pool_, *metrics_, health_, [this] {
        std::vector<WorkerPool::RunningJob> jobs;
        for (const auto& [id, attempt] : completer_->queued_jobs()) jobs.push_back({id, attempt});
        return jobs;
      });
  lease_guard_ = std::make_unique<LeaseGuard>(
      *pool_, [this] { return maintenance_->last_renewal(); }, config_.lease.duration,
      std::min<Millis>(config_.lease.duration / 10, Millis(2000)));
  health_.clear("engine");
  spdlog::info("pgjobd ready");
}

std::vector<std::string> Engine::Impl::reload(const Config& next) {
  // Never wait here: start() may be waiting for the database for a long time.
  std::unique_lock lifecycle(lifecycle_mutex_, std::try_to_lock);
  if (!lifecycle.owns_lock() || !fetcher_ || drained_) {
    throw std::logic_error("the daemon is starting or draining; reload again once it runs");
  }
  HandlerTable handlers;
  try {
    handlers = build_handlers(next);  // the one step that can fail: do it before changing anything
  } catch (const std::exception&) {
    metrics_->config_reload(false);
    throw;
  }
  const Config current = current_config();
  std::vector<std::string> needs_restart;
  const auto compare = [&](bool changed, const char* key) {
    if (changed) needs_restart.push_back(std::string(key) + " changed: restart pgjobd to apply it");
  };
  compare(next.database.url != current.database.url, "database.url");
  compare(next.database.schema != current.database.schema, "database.schema");
  compare(next.database.synchronous_claims != current.database.synchronous_claims,
          "database.synchronous_claims");
  compare(next.metrics.listen != current.metrics.listen, "metrics.listen");
  compare(next.lease.duration != current.lease.duration, "lease.duration");
  compare(next.poll.listen_notify != current.poll.listen_notify, "poll.listen_notify");

  // Narrow the claimed types first and widen them last, so a claimed job always finds
  // its handler.
  std::vector<std::string> kept_types;
  for (const auto& [type, handler] : handlers_) {
    if (handlers.count(type)) kept_types.push_back(type);
  }
  fetcher_->reconfigure(next.poll, kept_types);
  runner_->reconfigure(next.retry, handlers);
  fetcher_->reconfigure(next.poll, keys_of(handlers));
  {
    std::lock_guard lock(pool_mutex_);
    pool_->resize(next.worker);
  }
  metrics_->set_workers_max(next.worker.concurrency);
  maintenance_->set_retention(next.retention);
  completer_->set_delete_done(next.retention.done.count() == 0);
  {
    std::lock_guard lock(config_mutex_);
    Config applied = next;
    applied.database = current.database;
    applied.metrics = current.metrics;
    applied.lease = current.lease;
    applied.poll.listen_notify = current.poll.listen_notify;
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
  drained_ = true;
  stop_requested_ = true;
  health_.set_problem("engine", "draining");
  if (!fetcher_) {  // start() was interrupted before the engine ran
    http_.reset();
    return;
  }
  const Config config = current_config();
  spdlog::info("draining: no new jobs; waiting up to {} for {} running job(s)",
               format_duration(config.shutdown.timeout), pool_->busy());
  if (listener_) listener_->stop();
  fetcher_->stop();

  bool idle = pool_->wait_idle(Clock::now() + config.shutdown.timeout);
  if (!idle) {
    spdlog::warn("stopping {} job(s) still running{}; they return to the queue", pool_->busy(),
                 hurried_ ? " (second signal)" : " after the shutdown timeout");
    pool_->request_stop_all();
    // Not interruptible: exec children get their TERM-then-KILL grace either way.
    idle = pool_->wait_idle(Clock::now() + release_grace(), /*interruptible=*/false);
  }
  bool stuck = false;
  if (!idle) {
    // Handlers that ignore their stop token: release their jobs ourselves. If one finishes
    // later its completion is fenced off (the attempt is no longer running).
    stuck = true;
    for (const auto& job : pool_->running()) {
      completer_->submit({job.id, job.attempt, Outcome::kReleased, {}, Millis(0)});
    }
    spdlog::error("{} handler(s) ignored the stop request; their jobs were released",
                  pool_->busy());
  }
  lease_guard_.reset();  // it reads the maintenance's renewal time and stops pool jobs
  maintenance_->stop();  // it heartbeats the running jobs: stop it before the pool goes
  std::lock_guard lock(pool_mutex_);
  if (stuck) {
    stuck_jobs_ = pool_->busy();
    // Their threads cannot be joined, and they still reach the runner, completer, metrics
    // and fetcher when they return: keep all of those alive. The process exits next.
    (void)pool_.release();
    (void)runner_.release();
    (void)metrics_.release();
    (void)fetcher_.release();
  } else {
    // Joins the workers: after this no thread calls into the fetcher or completer.
    pool_.reset();
  }
  fetcher_ptr_ = nullptr;
  completer_->stop(Clock::now() + std::min<Millis>(config_.lease.duration, Millis(10000)));
  if (stuck) (void)completer_.release();
  http_.reset();
  spdlog::info("drained");
}

Engine::Engine(Config config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Engine::~Engine() = default;
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
bool Engine::responsive() const { return impl_->responsive(); }

}  // namespace pgjobd
