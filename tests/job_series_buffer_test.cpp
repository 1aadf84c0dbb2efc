// JobSeriesBuffer: what threads record reaches the prometheus-cpp objects at a flush,
// exactly as if each value had been recorded on them directly.

#include "metrics/job_series_buffer.hpp"

#include <gtest/gtest.h>
#include <prometheus/client_metric.h>

#include <thread>
#include <vector>

namespace pgjobd {
namespace {

const prometheus::Histogram::BucketBoundaries kBounds = {0.001, 0.01, 0.1, 1, 10};

std::vector<std::uint64_t> bucket_counts(const prometheus::Histogram& histogram) {
  std::vector<std::uint64_t> counts;
  for (const auto& bucket : histogram.Collect().histogram.bucket) {
    counts.push_back(bucket.cumulative_count);
  }
  return counts;
}

TEST(JobSeriesBuffer, AFlushAppliesWhatEveryThreadRecordedAsDirectRecordingWould) {
  // On a boundary, between, below the first, above the last, zero and negative.
  const std::vector<double> values = {0.001, 0.0005, 0.01, 0.05, 1, 10, 10.5, 1e9, 0, -1};
  JobSeriesBuffer buffer;
  prometheus::Counter counter;
  prometheus::Histogram buffered(kBounds);
  prometheus::Histogram direct(kBounds);
  constexpr int kThreads = 4;
  constexpr int kRounds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        for (const double value : values) {
          if (round % 2 == 0) {
            buffer.observe(buffered, kBounds, value);
            buffer.increment(counter);
          } else {
            buffer.increment_and_observe(counter, buffered, kBounds, value);
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kThreads * kRounds; ++i) {
    for (const double value : values) direct.Observe(value);
  }

  EXPECT_EQ(counter.Value(), 0) << "applied before a flush";
  EXPECT_EQ(buffered.Collect().histogram.sample_count, 0u);
  buffer.flush();
  EXPECT_EQ(counter.Value(), kThreads * kRounds * static_cast<double>(values.size()));
  EXPECT_EQ(bucket_counts(buffered), bucket_counts(direct));
  EXPECT_EQ(buffered.Collect().histogram.sample_count, direct.Collect().histogram.sample_count);
  // Summed in another order: equal but for rounding.
  const double direct_sum = direct.Collect().histogram.sample_sum;
  EXPECT_NEAR(buffered.Collect().histogram.sample_sum, direct_sum, 1e-12 * direct_sum);

  // A second flush adds nothing; what is recorded after it comes with the next one.
  buffer.flush();
  EXPECT_EQ(counter.Value(), kThreads * kRounds * static_cast<double>(values.size()));
  buffer.increment(counter);
  buffer.observe(buffered, kBounds, 0.5);
  buffer.flush();
  EXPECT_EQ(counter.Value(), kThreads * kRounds * static_cast<double>(values.size()) + 1);
  direct.Observe(0.5);
  EXPECT_EQ(bucket_counts(buffered), bucket_counts(direct));
}

TEST(JobSeriesBuffer, BuffersUsedByOneThreadStayApart) {
  prometheus::Counter first_counter;
  prometheus::Counter second_counter;
  {
    JobSeriesBuffer first;
    JobSeriesBuffer second;
    first.increment(first_counter);
    second.increment(second_counter);
    second.increment(second_counter);
    first.flush();
    EXPECT_EQ(first_counter.Value(), 1);
    EXPECT_EQ(second_counter.Value(), 0);
    second.flush();
    EXPECT_EQ(second_counter.Value(), 2);
  }
  // A buffer made after those are gone (perhaps at the same address) starts empty.
  JobSeriesBuffer third;
  third.flush();
  EXPECT_EQ(first_counter.Value(), 1);
  EXPECT_EQ(second_counter.Value(), 2);
  third.increment(first_counter);
  third.flush();
  EXPECT_EQ(first_counter.Value(), 2);
}

}  // namespace
}  // namespace pgjobd
