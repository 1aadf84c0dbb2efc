// The backoff formula: doubling, cap, and jitter bounds.

#include "engine/retry_policy.hpp"

#include <gtest/gtest.h>

namespace pgjobd {
namespace {

RetryConfig config(Millis base, Millis max_delay, double jitter) {
  RetryConfig c;
  c.base = base;
  c.max_delay = max_delay;
  c.jitter = jitter;
  return c;
}

TEST(RetryPolicy, DoublesFromBaseWithoutJitter) {
  const auto c = config(Millis(1000), Millis(600000), 0.0);
  EXPECT_EQ(retry_delay(c, 1, 0.5), Millis(1000));
  EXPECT_EQ(retry_delay(c, 2, 0.5), Millis(2000));
  EXPECT_EQ(retry_delay(c, 3, 0.5), Millis(4000));
  EXPECT_EQ(retry_delay(c, 10, 0.5), Millis(512000));
}

TEST(RetryPolicy, CapsAtMaxDelay) {
  const auto c = config(Millis(1000), Millis(600000), 0.0);
  EXPECT_EQ(retry_delay(c, 11, 0.5), Millis(600000));
  EXPECT_EQ(retry_delay(c, 1000, 0.5), Millis(600000));  // no overflow for huge attempts
}

TEST(RetryPolicy, JitterStaysWithinBounds) {
  const auto c = config(Millis(1000), Millis(600000), 0.1);
  EXPECT_EQ(retry_delay(c, 1, 0.0), Millis(900));
  EXPECT_EQ(retry_delay(c, 1, 0.5), Millis(1000));
  EXPECT_EQ(retry_delay(c, 3, 0.0), Millis(3600));
  for (int i = 0; i < 1000; ++i) {
    const Millis d = retry_delay(c, 4);
    ASSERT_GE(d, Millis(7200));
    ASSERT_LE(d, Millis(8800));
  }
}

TEST(RetryPolicy, JitterAppliesToTheCappedDelay) {
  const auto c = config(Millis(1000), Millis(10000), 0.2);
  EXPECT_EQ(retry_delay(c, 20, 0.0), Millis(8000));
  EXPECT_LE(retry_delay(c, 20, 0.999999), Millis(12000));
}

TEST(RetryPolicy, RandomJitterActuallyVaries) {
  const auto c = config(Millis(1000), Millis(600000), 0.5);
  Millis lowest = Millis::max(), highest = Millis::min();
  for (int i = 0; i < 200; ++i) {
    const Millis d = retry_delay(c, 1);
    lowest = std::min(lowest, d);
    highest = std::max(highest, d);
  }
  EXPECT_LT(lowest, Millis(900));
  EXPECT_GT(highest, Millis(1100));
}

}  // namespace
}  // namespace pgjobd
