// LeaseRenewer: one heartbeat per interval (or on request), its outcome applied to the pool.

#include "engine/lease_renewer.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/loop_error.hpp"

namespace pgjobd {

using Clock = std::chrono::steady_clock;

Millis LeaseRenewer::interval_for(Millis lease) { return std::max<Millis>(lease / 3, Millis(100)); }

LeaseRenewer::LeaseRenewer(Millis lease, std::string worker_id,
                           std::unique_ptr<HeartbeatStore> store, WorkerPool& pool,
                           Metrics& metrics, Health& health, AwaitingCompletion awaiting_completion)
    : lease_(lease),
      interval_(interval_for(lease)),
      worker_id_(std::move(worker_id)),
      store_(std::move(store)),
      pool_(pool),
      metrics_(metrics),
      health_(health),
      awaiting_completion_(std::move(awaiting_completion)) {}

LeaseRenewer::~LeaseRenewer() { stop(); }

void LeaseRenewer::start() {
  thread_.start([this](const std::stop_token& stop) { run(stop); });
}
void LeaseRenewer::request_stop() { thread_.request_stop(); }
void LeaseRenewer::join() { thread_.join(); }

void LeaseRenewer::request_heartbeat() {
  {
    std::lock_guard lock(mutex_);
    requested_ = true;
  }
  wake_.notify_all();
}

void LeaseRenewer::run(const std::stop_token& stop) {
  auto next = Clock::now() + interval_;
  std::unique_lock lock(mutex_);
  while (!stop.stop_requested()) {
    wake_.wait_until(lock, stop, next, [this] { return requested_; });
    if (stop.stop_requested()) break;
    requested_ = false;
    lock.unlock();
    try {
      const auto watch = health_.watch_call("heartbeat");
      heartbeat();
      health_.clear("heartbeat");
    } catch (const std::exception& e) {  // a DbError, or a bug: the pass is lost, not the loop
      // Not a renewal: LeaseGuard stops the jobs whose leases run out meanwhile. Retried at
      // the next interval, which leaves two more before the lease ends.
      count_loop_error(&metrics_, "heartbeat", "heartbeat", e);
      health_.set_problem("heartbeat", e.what());
      spdlog::warn("heartbeat failed: {}", e.what());
    }
    next = Clock::now() + interval_;
    lock.lock();
  }
}

void LeaseRenewer::heartbeat() {
  const auto sent_at = Clock::now();  // the renewed leases run from no earlier than this
  const std::vector<JobAttempt> running = pool_.running();
  std::vector<JobAttempt> leased = running;
  if (awaiting_completion_) {
    for (const auto& job : awaiting_completion_()) leased.push_back(job);
    // A job can be in both for a moment (handed to the completer, not yet out of the pool).
    std::sort(leased.begin(), leased.end());
    leased.erase(std::unique(leased.begin(), leased.end()), leased.end());
  }
  if (leased.empty()) {
    held_.clear();
    held_logged_.clear();
    return;
  }
  const HeartbeatReport report = store_->heartbeat(leased, worker_id_, lease_);
  pool_.renewed(report.kept, sent_at);
  report_held(report.held);
  if (!report.cancel_requested.empty()) {
    // pgjobd_cancel marked these: stop their handlers (each once; one that already
    // returned is finishing anyway, and the completion reads the mark).
    for (const JobAttempt& job : pool_.cancel_jobs(report.cancel_requested)) {
      spdlog::info("job {} attempt {}: cancel requested (pgjobd_cancel); stopping its handler",
                   job.id, job.attempt);
    }
  }
  if (report.kept.size() + report.held.size() == leased.size()) return;
  // A job that is not ours any more (its lease expired and it was rescued) must stop, so
  // two owners never keep running one job. Jobs that simply finished while the heartbeat
  // was in flight (their completion already written) are not lost.
  std::vector<JobAttempt> ours = report.kept;
  ours.insert(ours.end(), report.held.begin(), report.held.end());
  std::sort(ours.begin(), ours.end());
  std::vector<JobAttempt> missing;
  for (const auto& job : running) {
    if (!std::binary_search(ours.begin(), ours.end(), job)) missing.push_back(job);
  }
  const std::vector<JobAttempt> lost = pool_.still_running(missing);
  if (!lost.empty()) {
    metrics_.stale_write(static_cast<int>(lost.size()));
    spdlog::warn("lost the lease of {} running job(s); stopping them", lost.size());
    pool_.stop_jobs(lost);
  }
}

void LeaseRenewer::report_held(const std::vector<JobAttempt>& held) {
  // This daemon's own completer holds a finishing job's row for the milliseconds of its
  // write, and a heartbeat that meets it skips that row too: only a row held at two
  // heartbeats in a row (a third of a lease apart) is another session's, worth a line.
  std::set<JobAttempt> now(held.begin(), held.end());
  std::set<JobAttempt> logged;
  for (const JobAttempt& job : now) {
    if (held_logged_.contains(job)) {
      logged.insert(job);
      continue;
    }
    if (!held_.contains(job)) continue;
    logged.insert(job);
    metrics_.lease_renewal_held();
    spdlog::warn(
        "job {} attempt {}: another session holds its row locked, so its lease cannot be "
        "renewed; it keeps running while its lease lasts ({} from its last renewal) and is "
        "stopped and released if the lock outlasts it",
        job.id, job.attempt, format_duration(lease_));
  }
  held_ = std::move(now);
  held_logged_ = std::move(logged);
}

}  // namespace pgjobd
