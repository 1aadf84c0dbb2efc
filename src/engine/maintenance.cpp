// Maintenance: a single timer loop over leadership + rescue, retention, stats, limits and the
// daemon registry.

#include "engine/maintenance.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "engine/lease_renewer.hpp"
#include "engine/loop_error.hpp"
#include "pgjobd/version.hpp"

namespace pgjobd {

using Clock = std::chrono::steady_clock;

namespace {
// Rescue often enough that a dead daemon's jobs return within about one lease plus a few
// seconds, yet cheaply enough for an idle daemon (one query per 5 s, leadership included).
std::chrono::milliseconds rescue_interval_for(Millis lease) {
  return std::clamp<Millis>(lease / 3, Millis(200), Millis(5000));
}
std::vector<std::string> queue_names(const Config& config) {
  std::vector<std::string> names;
  for (const auto& [name, queue] : config.worker.queues) names.push_back(name);
  return names;
}
DaemonReport daemon_identity(const std::string& worker_id, const Config& config) {
  DaemonReport report;
  report.id = worker_id;
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  report.host = host;
  report.pid = getpid();
  report.version = kVersion;
  report.concurrency = config.worker.concurrency;
  // Rows not seen for three leases are gone: as long as a lease lets a dead daemon's jobs
  // wait, and two missed heartbeats more never hide a live daemon.
  report.ttl = config.lease.duration * 3;
  return report;
}
}  // namespace

Maintenance::Maintenance(const Config& config, std::string worker_id,
                         std::unique_ptr<JobStore> store, WorkerPool& pool, Metrics& metrics,
                         Health& health)
    : config_(config),
      worker_id_(std::move(worker_id)),
      pool_(pool),
      metrics_(metrics),
      health_(health),
      store_(std::move(store)),
      heartbeat_interval_(LeaseRenewer::interval_for(config.lease.duration)),
      rescue_interval_(rescue_interval_for(config.lease.duration)),
      daemon_(daemon_identity(worker_id_, config)),
      retention_(config.retention),
      queues_(queue_names(config)) {}

Maintenance::~Maintenance() { stop(); }

void Maintenance::start() {
  thread_.start([this](const std::stop_token& stop) { run(stop); });
}
void Maintenance::request_stop() { thread_.request_stop(); }
void Maintenance::join() { thread_.join(); }

void Maintenance::set_retention(const RetentionConfig& retention) {
  std::lock_guard lock(mutex_);
  retention_ = retention;
}

void Maintenance::set_queues(std::vector<std::string> queues) {
  {
    std::lock_guard lock(mutex_);
    queues_ = std::move(queues);
    stats_requested_ = true;
  }
  wake_.notify_all();
}

void Maintenance::set_limits(LimitRegistry* limits) { limits_ = limits; }

void Maintenance::prepare_limits() {
  if (limits_ == nullptr) return;
  guarded("limits", [&] { sync_limits(); });
  limits_prepared_ = true;
}

void Maintenance::request_limits_sync() {
  {
    std::lock_guard lock(mutex_);
    limits_requested_ = true;
  }
  wake_.notify_all();
}

void Maintenance::sync_limits() {
  limits_->sync(*store_);
  if (!limits_->active()) {
    metrics_.set_limit_running({});
    return;
  }
  std::vector<std::string> unkeyed;
  for (const LimitDefinition& definition : limits_->definitions()) {
    if (definition.limit.key.empty() && definition.limit.concurrency > 0) {
      unkeyed.push_back(definition.name);
    }
  }
  std::vector<std::pair<std::string, double>> running;
  for (const LimitUsage& usage : store_->limit_usage()) {
    if (std::find(unkeyed.begin(), unkeyed.end(), usage.name) != unkeyed.end()) {
      running.emplace_back(usage.name, static_cast<double>(usage.running));
    }
  }
  metrics_.set_limit_running(running);
}

template <typename Task>
void Maintenance::guarded(const char* operation, Task&& task) {
  try {
    task();
    // Any statement that went through shows the database is back: /readyz recovers
    // within one rescue interval of an outage, not at the next statistics round.
    health_.clear("database");
    last_call_failed_ = false;
  } catch (const std::exception& e) {  // a DbError, or a bug: the task is lost, not the loop
    count_loop_error(&metrics_, "maintenance", operation, e);
    last_call_failed_ = true;
    health_.set_problem("database", e.what());
    spdlog::warn("{} failed: {}", operation, e.what());
  }
}

void Maintenance::run(const std::stop_token& stop) {
  // The dashboard shows this daemon from its start, not from its first heartbeat interval.
  guarded("daemon report", [&] { report_daemon(); });
  auto now = Clock::now();
  auto next_report = now + heartbeat_interval_;
  auto next_rescue = now;
  auto next_stats = now;
  auto next_prune = now + std::chrono::seconds(5);
  auto next_schema_check = now + kSchemaCheckInterval;
  // A write that failed, or that another session's lock kept out, is retried soon, not a
  // heartbeat interval later.
  const auto limits_interval = [this] {
    const bool retry_soon = limits_ != nullptr && limits_->write_pending();
    return retry_soon
               ? std::min<std::chrono::milliseconds>(heartbeat_interval_, std::chrono::seconds(1))
               : heartbeat_interval_;
  };
  // When prepare_limits() ran just before, the first sync is one interval away.
  auto next_limits = limits_prepared_ ? now + limits_interval() : now;
  auto next_daemon_expiry = now;  // once leader
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    // The expiry waits for the others (it runs only when one of them is due): it is the
    // leader's upkeep of rows nobody shows, and never urgent.
    const auto next = std::min(
        {next_report, next_rescue, next_stats, next_prune, next_schema_check, next_limits});
    wake_.wait_until(lock, stop, next, [this] { return stats_requested_ || limits_requested_; });
    if (stop.stop_requested()) break;
    now = Clock::now();
    if (stats_requested_) {
      stats_requested_ = false;
      next_stats = now;
    }
    if (limits_requested_) {
      limits_requested_ = false;
      next_limits = now;
    }
    lock.unlock();
    if (now >= next_report) {
      guarded("daemon report", [&] { report_daemon(); });
      next_report = now + heartbeat_interval_;
    }
    if (now >= next_rescue) {
      const auto interval = next_rescue_interval();
      guarded("rescue", [&] { lead_and_rescue(interval); });
      next_rescue = now + interval;
    }
    if (now >= next_stats) {
      guarded("stats", [&] { collect_stats(); });
      next_stats = now + kStatsInterval;
    }
    if (now >= next_limits) {
      if (limits_ != nullptr) guarded("limits", [&] { sync_limits(); });
      next_limits = now + limits_interval();
    }
    if (now >= next_schema_check) {
      guarded("schema check", [&] { check_schema(); });
      next_schema_check = now + kSchemaCheckInterval;
    }
    if (now >= next_daemon_expiry && leader_) {
      guarded("daemon expiry", [&] { store_->expire_daemons(); });
      next_daemon_expiry = now + kDaemonExpiryInterval;
    }
    if (now >= next_prune) {
      bool backlog = false;
      if (leader_) guarded("prune", [&] { backlog = prune(stop); });
      // A backlog goes on after a pause counted from the pass's end: time the claim path
      // has the database to itself. A follower waits an interval too: left due, the loop
      // would wake at once, again and again.
      next_prune = backlog ? Clock::now() + kPrunePause : now + kPruneInterval;
    }
    lock.lock();
  }
  lock.unlock();
  // Courtesies of a clean exit, skipped when the last call failed: against a database that
  // stopped answering each would cost a connect timeout on the way out, and without them
  // the leadership and the daemon's row expire by themselves.
  if (last_call_failed_) return;
  if (leader_) guarded("resign", [&] { store_->resign(worker_id_); });
  guarded("daemon remove", [&] { store_->remove_daemon(worker_id_); });
}

void Maintenance::report_daemon() {
  // At each heartbeat interval while the busy count moves; otherwise once per lease, which
  // is enough to stay within the row's 3 × lease and keeps an idle daemon's cost at one
  // statement per lease (0.03/s at the default 30 s) rather than three.
  const int busy = pool_.working();
  const auto now = Clock::now();
  if (last_daemon_report_ && busy == daemon_.busy &&
      now - *last_daemon_report_ < config_.lease.duration) {
    return;
  }
  daemon_.busy = busy;
  store_->report_daemon(daemon_);
  last_daemon_report_ = now;
}

std::chrono::milliseconds Maintenance::next_rescue_interval() {
  const std::uint64_t submitted = pool_.submitted();
  const std::uint64_t holds = limits_ != nullptr ? limits_->holds() : 0;
  // Due jobs held back by a limit count as work: another daemon may hold their places.
  const bool idle =
      pool_.busy() == 0 && submitted == submitted_at_last_pass_ && holds == holds_at_last_pass_;
  submitted_at_last_pass_ = submitted;
  holds_at_last_pass_ = holds;
  return idle ? std::max<Millis>(rescue_interval_, kIdleRescueInterval) : rescue_interval_;
}

void Maintenance::lead_and_rescue(std::chrono::milliseconds interval) {
  // The leadership outlives three passes at the interval this daemon will keep until the
  // next one, so a leader that goes idle is not taken over while it is alive.
  const RescueReport report =
      store_->lead_and_rescue(worker_id_, interval * 3, config_.retry, kRescueBatch);
  if (report.leader != leader_) {
    spdlog::info(report.leader ? "this daemon is now the maintenance leader"
                               : "this daemon is no longer the maintenance leader");
    leader_ = report.leader;
  }
  const int total = report.failed + report.dead + report.cancelled;
  if (total == 0) return;
  metrics_.rescued(total);
  spdlog::warn(
      "rescued {} job(s) with an expired lease: {} back in the queue, {} dead, {} cancelled (a "
      "cancel was pending)",
      total, report.failed, report.dead, report.cancelled);
}

bool Maintenance::prune(const std::stop_token& stop) {
  RetentionConfig retention;
  {
    std::lock_guard lock(mutex_);
    retention = retention_;
  }
  const auto started = Clock::now();
  if (!prune_backlog_since_ && limits_ != nullptr && limits_->active()) {
    // Once per interval (not per pass of a backlog): idle partitions are not urgent.
    const int removed = store_->collect_limit_garbage(kLimitPartitionIdle, kPruneSlice);
    if (removed > 0) spdlog::debug("limits: deleted {} idle partition row(s)", removed);
  }
  int deleted = 0;
  bool more = true;
  while (more && !stop.stop_requested() && Clock::now() - started < kPrunePassBudget) {
    const int n = store_->prune(retention, kPruneSlice);
    deleted += n;
    more = n == kPruneSlice;
  }
  prune_backlog_deleted_ += deleted;
  if (more) {
    if (!prune_backlog_since_) {
      prune_backlog_since_ = started;
      spdlog::info("retention: more expired jobs than one pass deletes; deleting them in slices");
    }
    return true;
  }
  if (prune_backlog_deleted_ > 0) {
    const std::chrono::duration<double> took =
        Clock::now() - prune_backlog_since_.value_or(started);
    spdlog::info("retention: deleted {} finished job(s) in {:.1f} s", prune_backlog_deleted_,
                 took.count());
  }
  prune_backlog_since_.reset();
  prune_backlog_deleted_ = 0;
  return false;
}

void Maintenance::collect_stats() {
  std::vector<std::string> queues;
  {
    std::lock_guard lock(mutex_);
    queues = queues_;
  }
  std::vector<Metrics::DepthRow> depth;
  std::map<std::string, double> oldest;
  // Only the served queues: the metrics keep no series for any other (see Metrics).
  for (auto& row : store_->queue_stats(queues)) {
    depth.push_back({row.queue, row.status, row.count});
    oldest[row.queue] = std::max(oldest[row.queue], row.oldest_due_age_seconds);
  }
  const auto paused = store_->paused_queues(queues);
  health_.clear("database");
  metrics_.set_queue_depth(depth);
  metrics_.set_oldest_due_age({oldest.begin(), oldest.end()});
  metrics_.set_queue_paused(paused);
  metrics_.set_workers_busy(pool_.working());
  metrics_.set_jobs_held(pool_.held());
}

void Maintenance::check_schema() { health_.set_problem("schema", store_->schema_problem()); }

}  // namespace pgjobd
