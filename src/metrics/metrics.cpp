// Prometheus metrics of one engine: families built once, hot-path children found without Add().
#include "metrics/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "pgjobd/version.hpp"

namespace pgjobd {
namespace {

constexpr std::array kOutcomes = {Outcome::kDone, Outcome::kRetry, Outcome::kDead,
                                  Outcome::kReleased};

// 1 ms .. 60 s, roughly 1-2.5-5 per decade: fine where handlers usually are, coarse beyond.
const prometheus::Histogram::BucketBoundaries kDurationBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
// 1 ms .. 1 h: a healthy queue waits milliseconds, a backlogged one minutes or hours.
const prometheus::Histogram::BucketBoundaries kQueueWaitBuckets = {
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600};
// Powers of two up to 1024: a claim never takes more than the free worker slots.
const prometheus::Histogram::BucketBoundaries kBatchBuckets = {1,  2,   4,   8,   16,  32,
                                                               64, 128, 256, 512, 1024};

std::size_t outcome_index(Outcome outcome) {
  const auto index = static_cast<std::size_t>(outcome);
  return index < kOutcomes.size() ? index : static_cast<std::size_t>(Outcome::kRetry);
}

// The two per-job series of one (queue, type), one slot per outcome.
struct JobChildren {
  std::array<prometheus::Counter*, kOutcomes.size()> total{};
  std::array<prometheus::Histogram*, kOutcomes.size()> duration{};
};

}  // namespace

struct Metrics::State {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();

  prometheus::Family<prometheus::Counter>& jobs_total =
      prometheus::BuildCounter()
          .Name("pgjobd_jobs_total")
          .Help("Jobs finished, by queue, type and outcome (done, retry, dead, released).")
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
  prometheus::Gauge& workers_busy = prometheus::BuildGauge()
                                        .Name("pgjobd_workers_busy")
                                        .Help("Workers running a job right now.")
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
  prometheus::Counter& completions_dropped =
      prometheus::BuildCounter()
          .Name("pgjobd_completions_dropped_total")
          .Help(
              "Completions the database refused (a data error, not a lost connection), "
              "dropped so the others are written; their jobs return at lease expiry.")
          .Register(*registry)
          .Add({});
  prometheus::Histogram& fetch_batch = prometheus::BuildHistogram()
                                           .Name("pgjobd_fetch_batch_size")
                                           .Help("Jobs claimed per fetch query.")
                                           .Register(*registry)
                                           .Add({}, kBatchBuckets);
  prometheus::Gauge& poll_interval = prometheus::BuildGauge()
                                         .Name("pgjobd_poll_interval_seconds")
                                         .Help("Current interval between fetch polls.")
                                         .Register(*registry)
                                         .Add({});
  prometheus::Family<prometheus::Counter>& db_errors = prometheus::BuildCounter()
                                                           .Name("pgjobd_db_errors_total")
                                                           .Help("Database errors, by operation.")
                                                           .Register(*registry);
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

  // Series for label values not known at start; Family::Add under this mutex, then cached.
  std::mutex overflow_mutex;
  std::map<std::pair<std::string, std::string>, JobChildren> overflow_jobs;
  std::map<std::string, prometheus::Histogram*> overflow_queue_wait;
  std::map<std::string, prometheus::Counter*> db_error_children;

  // Gauges that are set wholesale; every series ever set stays (at 0) so scrapes are stable.
  std::mutex gauges_mutex;
  std::map<std::pair<std::string, std::string>, prometheus::Gauge*> depth_children;
  std::map<std::string, prometheus::Gauge*> oldest_due_children;

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

  const JobChildren& job_children(const std::string& queue, const std::string& type) {
    if (const auto by_queue = known_jobs.find(queue); by_queue != known_jobs.end()) {
      if (const auto found = by_queue->second.find(type); found != by_queue->second.end()) {
        return found->second;
      }
    }
    std::lock_guard lock(overflow_mutex);
    auto key = std::make_pair(queue, type);
    auto found = overflow_jobs.find(key);
    if (found == overflow_jobs.end()) {
      found = overflow_jobs.emplace(std::move(key), add_job_children(queue, type)).first;
    }
    return found->second;  // std::map nodes never move, so the reference outlives the lock
  }

  prometheus::Histogram& queue_wait_child(const std::string& queue) {
    if (const auto found = known_queue_wait.find(queue); found != known_queue_wait.end()) {
      return *found->second;
    }
    std::lock_guard lock(overflow_mutex);
    auto& child = overflow_queue_wait[queue];
    if (child == nullptr) child = &queue_wait.Add({{"queue", queue}}, kQueueWaitBuckets);
    return *child;
  }

  // Caller holds gauges_mutex.
  prometheus::Gauge& oldest_due_child(const std::string& queue) {
    auto& child = oldest_due_children[queue];
    if (child == nullptr) child = &oldest_due_age.Add({{"queue", queue}});
    return *child;
  }
};

Metrics::Metrics(const std::vector<std::string>& queues, const std::vector<std::string>& types)
    : state_(std::make_unique<State>()) {
  for (const auto& queue : queues) {
    state_->known_queue_wait[queue] =
        &state_->queue_wait.Add({{"queue", queue}}, kQueueWaitBuckets);
    state_->oldest_due_child(queue);  // visible as 0 before the first measurement
    for (const auto& type : types) {
      state_->known_jobs[queue][type] = state_->add_job_children(queue, type);
    }
  }
  state_->build_info.Add({{"version", kVersion}}).Set(1);
}

Metrics::~Metrics() = default;

std::shared_ptr<prometheus::Registry> Metrics::registry() const { return state_->registry; }

void Metrics::job_finished(const std::string& queue, const std::string& type, Outcome outcome,
                           double duration_seconds) {
  const JobChildren& children = state_->job_children(queue, type);
  const std::size_t index = outcome_index(outcome);
  children.total[index]->Increment();
  children.duration[index]->Observe(duration_seconds);
}

void Metrics::job_started(const std::string& queue, double queue_wait_seconds) {
  state_->queue_wait_child(queue).Observe(queue_wait_seconds);
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
  for (const auto& [queue, age] : values) state_->oldest_due_child(queue).Set(age);
}

void Metrics::set_workers_busy(int busy) { state_->workers_busy.Set(busy); }

void Metrics::set_workers_max(int max) { state_->workers_max.Set(max); }

void Metrics::retried() { state_->retries.Increment(); }

void Metrics::rescued(int count) { state_->rescued.Increment(count); }

void Metrics::stale_write(int count) { state_->stale_writes.Increment(count); }
void Metrics::completion_dropped() { state_->completions_dropped.Increment(); }

void Metrics::fetch_batch(int size) { state_->fetch_batch.Observe(size); }

void Metrics::set_poll_interval(double seconds) { state_->poll_interval.Set(seconds); }

void Metrics::config_reload(bool applied) {
  (applied ? state_->reloads_applied : state_->reloads_rejected).Increment();
}

void Metrics::db_error(const std::string& operation) {
  // Rare (an error path), so a mutex-guarded lookup is fine here.
  std::lock_guard lock(state_->overflow_mutex);
  auto& child = state_->db_error_children[operation];
  if (child == nullptr) child = &state_->db_errors.Add({{"operation", operation}});
  child->Increment();
}

}  // namespace pgjobd
