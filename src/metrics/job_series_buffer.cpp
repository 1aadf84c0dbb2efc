// JobSeriesBuffer: one shard per recording thread, applied under the shard's own lock.

#include "metrics/job_series_buffer.hpp"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <unordered_map>
#include <utility>

namespace pgjobd {
namespace {
std::atomic<std::uint64_t> next_buffer_id{1};
}  // namespace

// Aligned to a cache line: the shards of two threads running on two cores would otherwise
// share one, and every record would move it between them.
struct alignas(64) JobSeriesBuffer::Shard {
  struct Observations {
    std::vector<double> buckets;  // per bucket, not cumulative; the last one is +Inf
    double sum = 0;
    bool any = false;
  };
  std::mutex mutex;  // its thread's records and the scrapes' flushes
  // Entries stay once made (zeroed by a flush): a series a thread recorded once is likely
  // recorded again, and nothing is allocated then.
  std::unordered_map<prometheus::Counter*, double> counters;
  std::unordered_map<prometheus::Histogram*, Observations> histograms;

  // Callers hold `mutex`.
  void observe_locked(prometheus::Histogram& histogram,
                      const prometheus::Histogram::BucketBoundaries& bounds, double value) {
    // The bucket Histogram::Observe picks: the first boundary not below the value, else +Inf.
    const auto bucket = static_cast<std::size_t>(
        std::distance(bounds.begin(), std::lower_bound(bounds.begin(), bounds.end(), value)));
    Observations& pending = histograms[&histogram];
    if (pending.buckets.empty()) pending.buckets.assign(bounds.size() + 1, 0);
    pending.buckets[bucket] += 1;
    pending.sum += value;
    pending.any = true;
  }
};

JobSeriesBuffer::JobSeriesBuffer() : id_(next_buffer_id.fetch_add(1)) {}

JobSeriesBuffer::~JobSeriesBuffer() = default;

JobSeriesBuffer::Shard& JobSeriesBuffer::local() {
  // The shards this thread records into, by buffer id. One entry per buffer the thread
  // ever used (a worker serves one engine); the entry of a destroyed buffer is never
  // matched again, since ids are not reused.
  thread_local std::vector<std::pair<std::uint64_t, Shard*>> mine;
  for (const auto& [id, shard] : mine) {
    if (id == id_) return *shard;
  }
  std::lock_guard lock(shards_mutex_);
  Shard* shard = shards_.emplace_back(std::make_unique<Shard>()).get();
  mine.emplace_back(id_, shard);
  return *shard;
}

void JobSeriesBuffer::increment(prometheus::Counter& counter) {
  Shard& shard = local();
  std::lock_guard lock(shard.mutex);
  shard.counters[&counter] += 1;
}

void JobSeriesBuffer::observe(prometheus::Histogram& histogram,
                              const prometheus::Histogram::BucketBoundaries& bounds, double value) {
  Shard& shard = local();
  std::lock_guard lock(shard.mutex);
  shard.observe_locked(histogram, bounds, value);
}

void JobSeriesBuffer::increment_and_observe(prometheus::Counter& counter,
                                            prometheus::Histogram& histogram,
                                            const prometheus::Histogram::BucketBoundaries& bounds,
                                            double value) {
  Shard& shard = local();
  std::lock_guard lock(shard.mutex);
  shard.counters[&counter] += 1;
  shard.observe_locked(histogram, bounds, value);
}

void JobSeriesBuffer::flush() {
  std::lock_guard shards_lock(shards_mutex_);
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mutex);
    for (auto& [counter, count] : shard->counters) {
      if (count == 0) continue;
      counter->Increment(count);
      count = 0;
    }
    for (auto& [histogram, pending] : shard->histograms) {
      if (!pending.any) continue;
      histogram->ObserveMultiple(pending.buckets, pending.sum);
      std::fill(pending.buckets.begin(), pending.buckets.end(), 0);
      pending.sum = 0;
      pending.any = false;
    }
  }
}

}  // namespace pgjobd
