#pragma once
// The per-job series (a counter and two histograms for every job) recorded into a buffer
// of the calling thread and applied to their prometheus-cpp objects when scraped.
// Recorded straight into those objects, every job took two histogram mutexes and five
// compare-and-swap loops on cache lines that all workers share: in a noop backlog on two
// cores, a tenth of the daemon's samples. A thread's buffer has a lock of its own, which
// only a scrape ever waits for.

#include <prometheus/counter.h>
#include <prometheus/histogram.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace pgjobd {

class JobSeriesBuffer {
 public:
  JobSeriesBuffer();
  ~JobSeriesBuffer();
  JobSeriesBuffer(const JobSeriesBuffer&) = delete;
  JobSeriesBuffer& operator=(const JobSeriesBuffer&) = delete;

  // The objects must outlive this buffer (the registry holding them does).
  void increment(prometheus::Counter& counter);
  // `bounds`: the histogram's own bucket boundaries.
  void observe(prometheus::Histogram& histogram,
               const prometheus::Histogram::BucketBoundaries& bounds, double value);
  // Both at once, under one lock (a finished job: its counter and its duration).
  void increment_and_observe(prometheus::Counter& counter, prometheus::Histogram& histogram,
                             const prometheus::Histogram::BucketBoundaries& bounds, double value);
  // Applies what every thread recorded so far (before each scrape).
  void flush();

 private:
  struct Shard;
  Shard& local();

  const std::uint64_t id_;  // never reused: a thread's cached shard is matched by it
  std::mutex shards_mutex_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace pgjobd
