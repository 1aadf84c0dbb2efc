// PrefetchBudget: the finishes of the last horizon, and the payload cap.

#include "engine/prefetch_budget.hpp"

#include <algorithm>
#include <cmath>

namespace pgjobd {

namespace {
std::int64_t ticks(PrefetchBudget::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
constexpr std::int64_t kHorizonTicks =
    std::chrono::duration_cast<std::chrono::microseconds>(PrefetchBudget::kHorizon).count();
}  // namespace

void PrefetchBudget::finished(Clock::time_point started, Clock::time_point ended) {
  // A moving average over about the last 16 jobs: a change of job mix shows within a few
  // dozen finishes.
  const auto run_us = static_cast<double>(ticks(ended) - ticks(started));
  mean_run_us_ = mean_run_us_ < 0 ? run_us : mean_run_us_ + (run_us - mean_run_us_) / 16;
  // Workers read `ended` before the pool's lock, so finishes arrive slightly out of order:
  // one from just before a bucket's edge, arriving after the edge, counts in the current
  // bucket (going back would drop the counts of both).
  const std::int64_t bucket = std::max(ticks(ended) / kHorizonTicks, bucket_);
  if (bucket != bucket_) {
    previous_ = bucket == bucket_ + 1 ? current_ : 0;
    current_ = 0;
    bucket_ = bucket;
  }
  ++current_;
}

int PrefetchBudget::budget() const {
  constexpr auto kShortJobUs =
      static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(kShortJob).count());
  if (max_ <= 0 || mean_run_us_ < 0 || mean_run_us_ > kShortJobUs) return 0;
  const std::int64_t t = ticks(now_());
  const std::int64_t bucket = t / kHorizonTicks;
  // The part of the horizon that reaches back into the bucket before the current one.
  const double before = 1.0 - static_cast<double>(t % kHorizonTicks) / kHorizonTicks;
  double recent = 0;
  if (bucket == bucket_) {
    recent = static_cast<double>(current_) + static_cast<double>(previous_) * before;
  } else if (bucket == bucket_ + 1) {
    recent = static_cast<double>(current_) * before;
  }
  double allowed = std::min(recent, static_cast<double>(max_));
  if (largest_payload_ > 0) {
    // Whole payloads: one larger than the bound alone allows none.
    allowed = std::min(allowed, std::floor(static_cast<double>(kHeldPayloadBytes) /
                                           static_cast<double>(largest_payload_)));
  }
  // Rounded: one job finished just before a bucket's edge still counts as one.
  return static_cast<int>(std::lround(allowed));
}

}  // namespace pgjobd
