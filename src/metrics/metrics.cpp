// Prometheus metrics of one engine: families built once, hot-path children found without Add().
#include "metrics/metrics.hpp"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

#include "metrics/job_series_buffer.hpp"
#include "pgjobd/version.hpp"

namespace pgjobd {
namespace {

constexpr std::array kOutcomes = {Outcome::kDone, Outcome::kRetry, Outcome::kDead,
                                  Outcome::kReleased, Outcome::kCancelled};

// 1 ms .. 60 s, roughly 1-2.5-5 per decade: fine where handlers usually are, coarse beyond.
const prometheus::Histogram::BucketBoundaries kDurationBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
// 1 ms .. 1 h: a healthy queue waits milliseconds, a backlogged one minutes or hours.
const prometheus::Histogram::BucketBoundaries kQueueWaitBuckets = {
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600};
// Powers of two up to 16384: a claim takes at most the free workers (worker.concurrency,
// up to 10,000) and the jobs held for them (worker.prefetch, 1,000 by default): up to
// 1024 alone, the usual prefetching claim of a little over 1,000 showed only as +Inf.
const prometheus::Histogram::BucketBoundaries kBatchBuckets = {
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

// The operations that report database errors (fetcher, completer, listener, maintenance):
// the README lists them. A fixed list, so a new caller shows up as "(other)" in a test
// instead of as a series nobody documented.
const std::set<std::string, std::less<>> kDbOperations = {
    "claim",         "complete",      "connect",       "heartbeat",    "listen",         "prune",
    "rescue",        "resign",        "stats",         "schema check", "schedule",       "limits",
    "daemon report", "daemon remove", "daemon expiry", "dead letters", "notify finished"};

const std::string kOther = Metrics::kOtherLabel;

// The loops that survive an exception other than a database error (a bug, a library's own
// exception): the README lists them.
const std::array<std::string, 6> kLoops = {"claim",       "complete", "heartbeat",
                                           "maintenance", "schedule", "listen"};

// The statuses the statistics query returns (live jobs only).
const std::set<std::string, std::less<>> kLiveStatuses = {"pending", "failed", "running"};

std::size_t outcome_index(Outcome outcome) {
  const auto index = static_cast<std::size_t>(outcome);
  return index < kOutcomes.size() ? index : static_cast<std::size_t>(Outcome::kRetry);
}

// The registry as a scrape sees it: the per-job series' buffered values applied first.
class BufferedRegistry final : public prometheus::Collectable {
 public:
  BufferedRegistry(std::shared_ptr<prometheus::Registry> registry,
                   std::shared_ptr<JobSeriesBuffer> buffer)
      : registry_(std::move(registry)), buffer_(std::move(buffer)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    buffer_->flush();
    return registry_->Collect();
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<JobSeriesBuffer> buffer_;
};

}  // namespace

struct Metrics::State {
  // The two per-job series of one (queue, type), one slot per outcome.
  struct JobChildren {
    std::array<prometheus::Counter*, kOutcomes.size()> total{};
    std::array<prometheus::Histogram*, kOutcomes.size()> duration{};
  };

  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  // The per-job series are recorded here (see job_series_buffer.hpp). Shared with the
  // scrape's collectable, which may outlive this state (HttpServer holds it).
  std::shared_ptr<JobSeriesBuffer> job_series = std::make_shared<JobSeriesBuffer>();
  std::shared_ptr<prometheus::Collectable> collectable =
      std::make_shared<BufferedRegistry>(registry, job_series);

  prometheus::Family<prometheus::Counter>& jobs_total =
      prometheus::BuildCounter()
          .Name("pgjobd_jobs_total")
          .Help(
              "Jobs finished, by queue, type and outcome (done, retry, dead, released, cancelled).")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& job_duration =
      prometheus::BuildHistogram()
          .Name("pgjobd_job_duration_seconds")
          .Help("Time a handler ran, by queue, type and outcome.")
          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& queue_wait =
      prometheus::BuildHistogram()
          .Name("pgjobd_queue_wait_seconds")
          .Help("Time from a job's run_at to its start, by queue.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& queue_depth =
      prometheus::BuildGauge()
          .Name("pgjobd_queue_depth")
          .Help("Jobs in the table, by queue and status, as of the last measurement.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& oldest_due_age =
      prometheus::BuildGauge()
          .Name("pgjobd_oldest_due_job_age_seconds")
          .Help("Age (now - run_at) of the oldest due job not yet claimed, by queue; 0 if none.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& queue_paused =
      prometheus::BuildGauge()
          .Name("pgjobd_queue_paused")
          .Help("1 if the queue is paused (pgjobd_pause_queue), else 0, by served queue.")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& queue_blocked =
      prometheus::BuildGauge()
          .Name("pgjobd_queue_blocked")
          .Help("Jobs waiting for their parents (status blocked), by served queue.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& schedule_fires =
      prometheus::BuildCounter()
          .Name("pgjobd_schedule_fires_total")
          .Help(
              "Schedule ticks this daemon handled, by schedule and result (fired, "
              "skipped_overlap, missed).")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& limit_throttled =
      prometheus::BuildCounter()
          .Name("pgjobd_limit_throttled_total")
          .Help(
              "Claims in which a limit held back at least one due job (under one concurrency "
              "limit: that used up its room), by limit and reason (concurrency, rate).")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& limit_running =
      prometheus::BuildGauge()
          .Name("pgjobd_limit_running")
          .Help("Jobs running under each unkeyed limit, across all daemons.")
          .Register(*registry);
  prometheus::Gauge& schedule_overdue =
      prometheus::BuildGauge()
          .Name("pgjobd_schedule_overdue_seconds")
          .Help(
              "How long the most overdue active schedule's oldest unfired tick has waited, "
              "or while every pass misses ticks the first tick missed since; 0 if none.")
          .Register(*registry)
          .Add({});
  prometheus::Gauge& workers_busy = prometheus::BuildGauge()
                                        .Name("pgjobd_workers_busy")
                                        .Help("Workers running a job right now.")
                                        .Register(*registry)
                                        .Add({});
  prometheus::Gauge& jobs_held =
      prometheus::BuildGauge()
          .Name("pgjobd_jobs_held")
          .Help("Claimed jobs waiting in this daemon for a worker (worker.prefetch).")
          .Register(*registry)
          .Add({});
  prometheus::Gauge& workers_max = prometheus::BuildGauge()
                                       .Name("pgjobd_workers_max")
                                       .Help("Most jobs this daemon runs at once.")
                                       .Register(*registry)
                                       .Add({});
  prometheus::Counter& retries = prometheus::BuildCounter()
                                     .Name("pgjobd_retries_total")
                                     .Help("Failed attempts scheduled for another try.")
                                     .Register(*registry)
                                     .Add({});
  prometheus::Counter& rescued = prometheus::BuildCounter()
                                     .Name("pgjobd_rescued_total")
                                     .Help("Jobs whose lease expired, put back in the queue.")
                                     .Register(*registry)
                                     .Add({});
  prometheus::Counter& stale_writes =
      prometheus::BuildCounter()
          .Name("pgjobd_stale_writes_total")
          .Help(
              "Writes fenced off because the job is no longer ours (rescued, re-claimed): late "
              "completions and leases lost at heartbeat.")
          .Register(*registry)
          .Add({});
  prometheus::Counter& renewals_held =
      prometheus::BuildCounter()
          .Name("pgjobd_lease_renewals_held_total")
          .Help(
              "Running jobs whose lease heartbeats could not renew because another session "
              "held the job's row locked at two heartbeats in a row (once per job while held).")
          .Register(*registry)
          .Add({});
  prometheus::Counter& completions_dropped =
      prometheus::BuildCounter()
          .Name("pgjobd_completions_dropped_total")
          .Help(
              "Completions the database refused (a data error, not a lost connection), "
              "dropped so the others are written; their jobs return at lease expiry.")
          .Register(*registry)
          .Add({});
  prometheus::Counter& finished_unannounced =
      prometheus::BuildCounter()
          .Name("pgjobd_finished_unannounced_total")
          .Help(
              "Jobs ended by this daemon but not announced on pgjobd_finished: its "
              "notification session was down, or too many waited for it.")
          .Register(*registry)
          .Add({});
  prometheus::Counter& completions_held =
      prometheus::BuildCounter()
          .Name("pgjobd_completions_held_total")
          .Help(
              "Completions whose row another session held locked, at a write and at its "
              "retry: set aside and retried alone while the other batches are written "
              "(counted once per job).")
          .Register(*registry)
          .Add({});
  prometheus::Gauge& completions_waiting =
      prometheus::BuildGauge()
          .Name("pgjobd_completions_waiting_for_row_lock")
          .Help("Completions waiting now for a row another session holds locked.")
          .Register(*registry)
          .Add({});
  prometheus::Histogram& fetch_batch = prometheus::BuildHistogram()
                                           .Name("pgjobd_fetch_batch_size")
                                           .Help("Jobs claimed per fetch query.")
                                           .Register(*registry)
                                           .Add({}, kBatchBuckets);
  // 1 ms .. 60 s as the handlers': a claim takes milliseconds; one that takes a second
  // or more stalls the daemon (see the fetcher's warning).
  prometheus::Histogram& claim_duration =
      prometheus::BuildHistogram()
          .Name("pgjobd_claim_duration_seconds")
          .Help("Time a claim query took, from sending it to its last row.")
          .Register(*registry)
          .Add({}, kDurationBuckets);
  prometheus::Gauge& poll_interval = prometheus::BuildGauge()
                                         .Name("pgjobd_poll_interval_seconds")
                                         .Help("Current interval between fetch polls.")
                                         .Register(*registry)
                                         .Add({});
  prometheus::Family<prometheus::Counter>& db_errors = prometheus::BuildCounter()
                                                           .Name("pgjobd_db_errors_total")
                                                           .Help("Database errors, by operation.")
                                                           .Register(*registry);
  prometheus::Family<prometheus::Counter>& call_timeouts =
      prometheus::BuildCounter()
          .Name("pgjobd_db_call_timeouts_total")
          .Help(
              "Database calls abandoned at database.call_timeout (their session closed), by "
              "operation.")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& loop_errors =
      prometheus::BuildCounter()
          .Name("pgjobd_loop_errors_total")
          .Help("Unexpected errors (not database errors) a loop caught and survived, by loop.")
          .Register(*registry);
  // Built in the constructor for kLoops and kOther, never modified afterwards.
  std::map<std::string, prometheus::Counter*, std::less<>> loop_error_children;
  prometheus::Family<prometheus::Counter>& config_reloads =
      prometheus::BuildCounter()
          .Name("pgjobd_config_reloads_total")
          .Help("Configuration reloads (SIGHUP), by result: applied or rejected.")
          .Register(*registry);
  prometheus::Counter& reloads_applied = config_reloads.Add({{"result", "applied"}});
  prometheus::Counter& reloads_rejected = config_reloads.Add({{"result", "rejected"}});
  prometheus::Family<prometheus::Gauge>& build_info =
      prometheus::BuildGauge()
          .Name("pgjobd_build_info")
          .Help("Always 1; the version label says which pgjobd is running.")
          .Register(*registry);

  // Built in the constructor and never modified afterwards, so readers need no lock.
  std::unordered_map<std::string, std::unordered_map<std::string, JobChildren>> known_jobs;
  std::unordered_map<std::string, prometheus::Histogram*> known_queue_wait;

  // Label values configured at start or by a reload since; anything else is kOtherLabel.
  // The series of pairs not built in the constructor are added under this mutex, then
  // cached: at most (queues ever configured + 1) x (types ever configured + 1) of them.
  std::mutex labels_mutex;
  std::set<std::string, std::less<>> configured_queues;
  std::set<std::string, std::less<>> configured_types;
  std::map<std::pair<std::string, std::string>, JobChildren> overflow_jobs;
  std::map<std::string, prometheus::Histogram*> overflow_queue_wait;
  // Per operation: pgjobd_db_errors_total's and pgjobd_db_call_timeouts_total's series.
  std::map<std::string, std::pair<prometheus::Counter*, prometheus::Counter*>, std::less<>>
      db_error_children;
  std::map<std::pair<std::string, std::string>, prometheus::Counter*> schedule_fire_children;
  std::set<std::string, std::less<>> schedule_labels;
  std::map<std::pair<std::string, std::string>, prometheus::Counter*> limit_throttled_children;
  std::map<std::string, prometheus::Gauge*, std::less<>> limit_running_children;

  // Gauges that are set wholesale, for the queues served now only (a reload that drops a
  // queue removes its series). Within them every series ever set stays (at 0) so scrapes
  // are stable.
  std::mutex gauges_mutex;
  std::set<std::string, std::less<>> served_queues;
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> depth_children;
  std::map<std::string, prometheus::Gauge*> oldest_due_children;
  std::map<std::string, prometheus::Gauge*> paused_children;
  std::map<std::string, prometheus::Gauge*> blocked_children;

  // Caller holds labels_mutex.
  std::pair<prometheus::Counter*, prometheus::Counter*>& db_error_children_of(
      const std::string& label) {
    auto& children = db_error_children[label];
    if (children.first == nullptr) {
      children = {&db_errors.Add({{"operation", label}}),
                  &call_timeouts.Add({{"operation", label}})};
    }
    return children;
  }

  // Caller holds labels_mutex: the series of (limit, reason), or none past the bound.
  prometheus::Counter* limit_throttled_child(const std::string& limit, const std::string& reason) {
    auto& children = limit_throttled_children;
    auto it = children.find({limit, reason});
    if (it == children.end()) {
      if (children.size() >= kMaxLimitLabels * 2) return nullptr;  // two reasons per limit
      it = children
               .emplace(std::make_pair(limit, reason),
                        &limit_throttled.Add({{"limit", limit}, {"reason", reason}}))
               .first;
    }
    return it->second;
  }

  JobChildren add_job_children(const std::string& queue, const std::string& type) {
    JobChildren children;
    for (const Outcome outcome : kOutcomes) {
      const prometheus::Labels labels = {
          {"queue", queue}, {"type", type}, {"outcome", to_string(outcome)}};
      children.total[outcome_index(outcome)] = &jobs_total.Add(labels);
      children.duration[outcome_index(outcome)] = &job_duration.Add(labels, kDurationBuckets);
    }
    return children;
  }

  // Caller holds labels_mutex.
  const JobChildren& overflow_job_children(const std::string& queue, const std::string& type) {
    auto key = std::make_pair(configured_queues.contains(queue) ? queue : kOther,
                              configured_types.contains(type) ? type : kOther);
    auto found = overflow_jobs.find(key);
    if (found == overflow_jobs.end()) {
      JobChildren children = add_job_children(key.first, key.second);
      found = overflow_jobs.emplace(std::move(key), children).first;
    }
    return found->second;  // std::map nodes never move, so the reference outlives the lock
  }

  // The pair's series were built in the constructor (found without a lock).
  const JobChildren* known(const std::string& queue, const std::string& type) const {
    if (const auto by_queue = known_jobs.find(queue); by_queue != known_jobs.end()) {
      if (const auto found = by_queue->second.find(type); found != by_queue->second.end()) {
        return &found->second;
      }
    }
    return nullptr;
  }
  bool is_known(const std::string& queue, const std::string& type) const {
    return known(queue, type) != nullptr;
  }

  const JobChildren& job_children(const std::string& queue, const std::string& type) {
    if (const JobChildren* children = known(queue, type)) return *children;
    std::lock_guard lock(labels_mutex);
    return overflow_job_children(queue, type);
  }

  // Caller holds labels_mutex.
  prometheus::Histogram& overflow_queue_wait_child(const std::string& queue) {
    const std::string& label = configured_queues.contains(queue) ? queue : kOther;
    auto& child = overflow_queue_wait[label];
    if (child == nullptr) child = &queue_wait.Add({{"queue", label}}, kQueueWaitBuckets);
    return *child;
  }

  prometheus::Histogram& queue_wait_child(const std::string& queue) {
    if (const auto found = known_queue_wait.find(queue); found != known_queue_wait.end()) {
      return *found->second;
    }
    std::lock_guard lock(labels_mutex);
    return overflow_queue_wait_child(queue);
  }

  // Caller holds gauges_mutex: the series of `queue` in a family labelled by queue only.
  static prometheus::Gauge& queue_child(std::map<std::string, prometheus::Gauge*>& children,
                                        prometheus::Family<prometheus::Gauge>& family,
                                        const std::string& queue) {
    auto& child = children[queue];
    if (child == nullptr) child = &family.Add({{"queue", queue}});
    return *child;
  }
  prometheus::Gauge& oldest_due_child(const std::string& queue) {
    return queue_child(oldest_due_children, oldest_due_age, queue);
  }
  prometheus::Gauge& paused_child(const std::string& queue) {
    return queue_child(paused_children, queue_paused, queue);
  }
  prometheus::Gauge& blocked_child(const std::string& queue) {
    return queue_child(blocked_children, queue_blocked, queue);
  }

  // Caller holds gauges_mutex: removes from `family` each series of `children` whose
  // queue (queue_of its key) is no longer served.
  template <typename Children, typename QueueOf>
  void drop_unserved(Children& children, prometheus::Family<prometheus::Gauge>& family,
                     QueueOf queue_of) {
    for (auto it = children.begin(); it != children.end();) {
      if (served_queues.contains(queue_of(it->first))) {
        ++it;
      } else {
        family.Remove(it->second);
        it = children.erase(it);
      }
    }
  }

  // Caller holds gauges_mutex: drops the series of queues no longer served and shows the
  // newly served ones at 0 before their first measurement.
  void serve_queues(const std::vector<std::string>& queues) {
    served_queues = {queues.begin(), queues.end()};
    drop_unserved(depth_children, queue_depth,
                  [](const auto& key) -> const std::string& { return key.first; });
    drop_unserved(oldest_due_children, oldest_due_age,
                  [](const auto& key) -> const std::string& { return key; });
    drop_unserved(paused_children, queue_paused,
                  [](const auto& key) -> const std::string& { return key; });
    drop_unserved(blocked_children, queue_blocked,
                  [](const auto& key) -> const std::string& { return key; });
    for (const auto& queue : served_queues) {
      oldest_due_child(queue);
      paused_child(queue);
      blocked_child(queue);
    }
  }
};

Metrics::Metrics(const std::vector<std::string>& queues, const std::vector<std::string>& types)
    : state_(std::make_unique<State>()) {
  state_->configured_queues.insert(queues.begin(), queues.end());
  state_->configured_types.insert(types.begin(), types.end());
  for (const auto& queue : queues) {
    state_->known_queue_wait[queue] =
        &state_->queue_wait.Add({{"queue", queue}}, kQueueWaitBuckets);
    for (const auto& type : types) {
      state_->known_jobs[queue][type] = state_->add_job_children(queue, type);
    }
  }
  {
    std::lock_guard lock(state_->gauges_mutex);
    state_->serve_queues(queues);
  }
  for (const std::string& loop : kLoops) {
    state_->loop_error_children[loop] = &state_->loop_errors.Add({{"loop", loop}});
  }
  state_->loop_error_children[kOther] = &state_->loop_errors.Add({{"loop", kOther}});
  // Every documented operation shows at 0 from the start, so rate() and alerts on them
  // work before the first failure.
  {
    std::lock_guard lock(state_->labels_mutex);
    for (const std::string& operation : kDbOperations) state_->db_error_children_of(operation);
    state_->db_error_children_of(kOther);
  }
  state_->build_info.Add({{"version", kVersion}}).Set(1);
}

Metrics::~Metrics() = default;

std::shared_ptr<prometheus::Collectable> Metrics::collectable() const {
  return state_->collectable;
}

void Metrics::set_served(const std::vector<std::string>& queues,
                         const std::vector<std::string>& types) {
  {
    std::lock_guard lock(state_->labels_mutex);
    state_->configured_queues.insert(queues.begin(), queues.end());
    state_->configured_types.insert(types.begin(), types.end());
    // The new pairs show as 0 at once, as those configured at start do.
    for (const auto& queue : queues) {
      if (!state_->known_queue_wait.contains(queue)) state_->overflow_queue_wait_child(queue);
      for (const auto& type : types) {
        if (!state_->is_known(queue, type)) state_->overflow_job_children(queue, type);
      }
    }
  }
  std::lock_guard lock(state_->gauges_mutex);
  state_->serve_queues(queues);
}

void Metrics::job_finished(const std::string& queue, const std::string& type, Outcome outcome,
                           double duration_seconds) {
  const State::JobChildren& children = state_->job_children(queue, type);
  const std::size_t index = outcome_index(outcome);
  state_->job_series->increment_and_observe(*children.total[index], *children.duration[index],
                                            kDurationBuckets, duration_seconds);
}

void Metrics::job_started(const std::string& queue, double queue_wait_seconds) {
  state_->job_series->observe(state_->queue_wait_child(queue), kQueueWaitBuckets,
                              queue_wait_seconds);
}

void Metrics::set_queue_depth(const std::vector<DepthRow>& rows) {
  // Sum first so each series is set once: a scrape never sees a half-applied update.
  std::map<std::pair<std::string, std::string>, double> values;
  for (const auto& row : rows) values[{row.queue, row.status}] += row.count;

  std::lock_guard lock(state_->gauges_mutex);
  for (auto& [key, gauge] : state_->depth_children) {
    if (!values.contains(key)) gauge->Set(0);
  }
  for (const auto& [key, value] : values) {
    // The query asks only for served queues, but a reload may have dropped one since it
    // was sent: its series must not come back.
    if (!state_->served_queues.contains(key.first) || !kLiveStatuses.contains(key.second)) {
      continue;
    }
    auto& gauge = state_->depth_children[key];
    if (gauge == nullptr) {
      gauge = &state_->queue_depth.Add({{"queue", key.first}, {"status", key.second}});
    }
    gauge->Set(value);
  }
}

void Metrics::set_oldest_due_age(const std::vector<std::pair<std::string, double>>& ages) {
  std::map<std::string, double> values(ages.begin(), ages.end());
  std::lock_guard lock(state_->gauges_mutex);
  for (auto& [queue, gauge] : state_->oldest_due_children) {
    if (!values.contains(queue)) gauge->Set(0);
  }
  for (const auto& [queue, age] : values) {
    if (state_->served_queues.contains(queue)) state_->oldest_due_child(queue).Set(age);
  }
}

void Metrics::set_queue_paused(const std::vector<std::string>& paused) {
  const std::set<std::string, std::less<>> values(paused.begin(), paused.end());
  std::lock_guard lock(state_->gauges_mutex);
  for (const auto& queue : state_->served_queues) {
    state_->paused_child(queue).Set(values.contains(queue) ? 1 : 0);
  }
}

void Metrics::set_queue_blocked(const std::vector<std::pair<std::string, double>>& blocked) {
  const std::map<std::string, double, std::less<>> values(blocked.begin(), blocked.end());
  std::lock_guard lock(state_->gauges_mutex);
  for (const auto& queue : state_->served_queues) {
    const auto it = values.find(queue);
    state_->blocked_child(queue).Set(it == values.end() ? 0 : it->second);
  }
}

void Metrics::set_workers_busy(int busy) { state_->workers_busy.Set(busy); }
void Metrics::set_jobs_held(int held) { state_->jobs_held.Set(held); }

void Metrics::set_workers_max(int max) { state_->workers_max.Set(max); }

void Metrics::retried() { state_->retries.Increment(); }

void Metrics::rescued(int count) { state_->rescued.Increment(count); }

void Metrics::stale_write(int count) { state_->stale_writes.Increment(count); }
void Metrics::lease_renewal_held() { state_->renewals_held.Increment(); }
void Metrics::completion_dropped() { state_->completions_dropped.Increment(); }
void Metrics::finished_unannounced(std::size_t jobs) {
  state_->finished_unannounced.Increment(static_cast<double>(jobs));
}
void Metrics::completion_held() { state_->completions_held.Increment(); }
void Metrics::set_completions_waiting(double waiting) { state_->completions_waiting.Set(waiting); }

void Metrics::fetch_batch(int size) { state_->fetch_batch.Observe(size); }
void Metrics::claim_duration(double seconds) { state_->claim_duration.Observe(seconds); }

void Metrics::set_poll_interval(double seconds) { state_->poll_interval.Set(seconds); }

void Metrics::config_reload(bool applied) {
  (applied ? state_->reloads_applied : state_->reloads_rejected).Increment();
}

void Metrics::db_error(const std::string& operation, bool timed_out) {
  // Rare (an error path), so a mutex-guarded lookup is fine here.
  const std::string& label = kDbOperations.contains(operation) ? operation : kOther;
  std::lock_guard lock(state_->labels_mutex);
  const auto& [errors, timeouts] = state_->db_error_children_of(label);
  errors->Increment();
  if (timed_out) timeouts->Increment();
}

void Metrics::loop_error(std::string_view loop) {
  const auto child = state_->loop_error_children.find(loop);
  (child != state_->loop_error_children.end() ? child->second
                                              : state_->loop_error_children.at(kOther))
      ->Increment();
}

void Metrics::schedule_fires(const std::string& schedule, const std::string& result, int count) {
  if (count <= 0) return;
  std::lock_guard lock(state_->labels_mutex);
  std::set<std::string, std::less<>>& names = state_->schedule_labels;
  if (!names.contains(schedule) && names.size() < kMaxScheduleLabels) names.insert(schedule);
  const std::string& label = names.contains(schedule) ? schedule : kOther;
  auto& child = state_->schedule_fire_children[{label, result}];
  if (child == nullptr) {
    child = &state_->schedule_fires.Add({{"schedule", label}, {"result", result}});
  }
  child->Increment(count);
}

void Metrics::set_schedule_overdue(double seconds) { state_->schedule_overdue.Set(seconds); }

void Metrics::limit_throttled(const std::string& limit, const std::string& reason) {
  std::lock_guard lock(state_->labels_mutex);
  if (prometheus::Counter* child = state_->limit_throttled_child(limit, reason)) {
    child->Increment();
  }
}

void Metrics::set_limits(const std::vector<std::pair<std::string, std::string>>& limit_reasons) {
  std::lock_guard lock(state_->labels_mutex);
  for (const auto& [limit, reason] : limit_reasons) state_->limit_throttled_child(limit, reason);
}

void Metrics::set_limit_running(const std::vector<std::pair<std::string, double>>& running) {
  std::lock_guard lock(state_->labels_mutex);
  // Limits removed since the last call lose their series.
  for (auto it = state_->limit_running_children.begin();
       it != state_->limit_running_children.end();) {
    const bool kept = std::any_of(running.begin(), running.end(),
                                  [&](const auto& row) { return row.first == it->first; });
    if (kept) {
      ++it;
    } else {
      state_->limit_running.Remove(it->second);
      it = state_->limit_running_children.erase(it);
    }
  }
  auto& children = state_->limit_running_children;
  for (const auto& [limit, value] : running) {
    auto it = children.find(limit);
    if (it == children.end()) {
      if (children.size() >= kMaxLimitLabels) continue;
      it = children.emplace(limit, &state_->limit_running.Add({{"limit", limit}})).first;
    }
    it->second->Set(value);
  }
}

}  // namespace pgjobd
