// Health: a database call in flight past the stall bound makes the daemon not ready, and
// one far past its deadline makes it wedged; neither once the call returned.

#include "engine/health.hpp"

#include <gtest/gtest.h>

#include <optional>

#include "db/call_deadline.hpp"  // Millis
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::wait_until;
using std::chrono::seconds;

TEST(Health, ACallWithoutAnAnswerPastTheStallBoundIsNotReady) {
  Health health;
  health.set_stall_after(Millis(200));
  std::optional<Health::CallWatch> watch;
  watch.emplace(health, "fetcher");
  EXPECT_EQ(health.problems(), "");  // in flight, but not for long yet
  ASSERT_TRUE(wait_until([&] { return !health.problems().empty(); }, seconds(20)));
  EXPECT_EQ(health.problems().rfind("fetcher: no answer from the database for ", 0), 0u)
      << health.problems();
  watch.reset();  // the answer came
  EXPECT_EQ(health.problems(), "");
}

TEST(Health, ACallFarPastItsBoundIsWedged) {
  Health health;
  const auto watch = health.watch_call("heartbeat");
  EXPECT_EQ(health.wedged(Millis(60000)), "");
  ASSERT_TRUE(wait_until([&] { return !health.wedged(Millis(100)).empty(); }, seconds(20)));
  EXPECT_EQ(health.wedged(Millis(100)).rfind("heartbeat: a database call has not returned for ", 0),
            0u);
  // Readiness without a stall bound set says nothing of calls in flight.
  EXPECT_EQ(health.problems(), "");
}

TEST(Health, ProblemsOfPartsAndStallsAreListedTogether) {
  Health health;
  health.set_stall_after(Millis(1));
  health.set_problem("schema", "at version 2, expected 12");
  const auto watch = health.watch_call("completer");
  ASSERT_TRUE(wait_until(
      [&] { return health.problems().find("completer: no answer") != std::string::npos; },
      seconds(20)));
  EXPECT_EQ(health.problems().rfind("schema: at version 2, expected 12; completer: ", 0), 0u)
      << health.problems();
}

}  // namespace
}  // namespace pgjobd
