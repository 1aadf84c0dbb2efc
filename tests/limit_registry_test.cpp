// LimitRegistry: a daemon with a `limits:` section writes it (at start, and again after a
// reload), one without writes nothing and applies the database's; a difference between
// this daemon's section and the database's is logged once; active() follows the database.

#include "limits/limit_registry.hpp"

#include <gtest/gtest.h>

#include <future>

#include "support/fake_job_store.hpp"
#include "support/log_capture.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::LogCapture;
using pgjobd::testing::StoreMethod;

LimitConfig rate(double per_second) {
  LimitConfig limit;
  limit.types = {"t"};
  limit.rate = std::to_string(per_second) + "/s";
  limit.rate_per_second = per_second;
  return limit;
}

LimitConfig concurrency(int n) {
  LimitConfig limit;
  limit.types = {"x"};
  limit.concurrency = n;
  return limit;
}

TEST(LimitRegistryTest, ADaemonWithASectionWritesItOnceAndAgainAfterAReload) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  LimitRegistry registry(LimitRegistry::Limits{{"a", concurrency(3)}}, "d1");
  EXPECT_TRUE(registry.active()) << "unknown yet: the safe answer";
  EXPECT_TRUE(registry.write_pending());
  registry.sync(*store);
  EXPECT_TRUE(registry.active());
  EXPECT_FALSE(registry.write_pending());
  registry.sync(*store);  // a refresh: reads, writes nothing
  EXPECT_EQ(database.table().limit_syncs().size(), 1u);
  ASSERT_EQ(registry.definitions().size(), 1u);
  EXPECT_EQ(registry.definitions()[0].limit.concurrency, 3);

  registry.set_configured(LimitRegistry::Limits{});  // `limits: {}`: remove them all
  registry.sync(*store);
  EXPECT_EQ(database.table().limit_syncs().size(), 2u);
  EXPECT_FALSE(registry.active());
}

TEST(LimitRegistryTest, ADaemonWithoutASectionAppliesTheDatabasesLimits) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  LimitRegistry registry(std::nullopt, "d2");
  EXPECT_FALSE(registry.write_pending());
  registry.sync(*store);
  EXPECT_FALSE(registry.active());
  database.table().set_limits({{"a", concurrency(1), "d1"}});
  registry.sync(*store);
  EXPECT_TRUE(registry.active());
  EXPECT_EQ(database.table().calls(StoreMethod::kSyncLimits), 0);
}

// The bound a daemon's holding takes from the limits: the smallest unkeyed concurrency
// limit that matches every job of the queues and types it serves; none when a served type
// or queue is outside it, when it is keyed, or when it limits the rate alone.
TEST(LimitRegistryTest, TheCoveringConcurrencyIsTheSmallestUnkeyedLimitOverAllServed) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  LimitRegistry registry(std::nullopt, "d2");
  LimitConfig keyed = concurrency(2);
  keyed.key = "user";
  LimitConfig by_queue;
  by_queue.queues = {"default", "mail"};
  by_queue.concurrency = 50;
  LimitConfig over_x_and_y = concurrency(30);
  over_x_and_y.types = {"x", "y"};
  database.table().set_limits({{"a", concurrency(40), "d1"},
                               {"b", keyed, "d1"},
                               {"c", rate(10), "d1"},
                               {"d", by_queue, "d1"},
                               {"e", over_x_and_y, "d1"}});
  registry.sync(*store);
  EXPECT_EQ(registry.covering_concurrency({"default"}, {"x"}), 30);
  EXPECT_EQ(registry.covering_concurrency({"default"}, {"x", "y"}), 30);
  EXPECT_EQ(registry.covering_concurrency({"default"}, {"y"}), 30);
  EXPECT_EQ(registry.covering_concurrency({"default", "mail"}, {"z"}), 50);
  EXPECT_EQ(registry.covering_concurrency({"default", "other"}, {"z"}), 0);
  EXPECT_EQ(registry.covering_concurrency({"other"}, {"t"}), 0) << "keyed, rate: no bound";
  database.table().set_limits({});
  registry.sync(*store);
  EXPECT_EQ(registry.covering_concurrency({"default"}, {"x"}), 0);
}

// The claim under one limit (ClaimRequest::one_concurrency_limit): exactly one limit
// meets the served queues and types, covering all of them, unkeyed, with a concurrency and
// no rate; as pgjobd_limits_met decides in the database.
TEST(LimitRegistryTest, OneConcurrencyLimitIsTheOnlyLimitMetAndCoversAllServed) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  LimitRegistry registry(std::nullopt, "d2");
  LimitConfig over_x = concurrency(30);
  over_x.types = {"x"};
  LimitConfig over_y_rated = concurrency(5);
  over_y_rated.types = {"y"};
  over_y_rated.rate = "10/s";
  over_y_rated.rate_per_second = 10;
  LimitConfig over_z_keyed = concurrency(5);
  over_z_keyed.types = {"z"};
  over_z_keyed.key = "user";
  LimitConfig mail_queue = concurrency(7);
  mail_queue.types = {};  // any type
  mail_queue.queues = {"mail"};
  database.table().set_limits({{"a", over_x, "d1"},
                               {"b", over_y_rated, "d1"},
                               {"c", over_z_keyed, "d1"},
                               {"d", mail_queue, "d1"}});
  registry.sync(*store);
  EXPECT_TRUE(registry.one_concurrency_limit({"default"}, {"x"}));
  EXPECT_FALSE(registry.one_concurrency_limit({"default"}, {"x", "t"})) << "t is not under it";
  EXPECT_FALSE(registry.one_concurrency_limit({"default"}, {"x", "y"})) << "two limits met";
  EXPECT_FALSE(registry.one_concurrency_limit({"default"}, {"y"})) << "a rate";
  EXPECT_FALSE(registry.one_concurrency_limit({"default"}, {"z"})) << "keyed";
  EXPECT_FALSE(registry.one_concurrency_limit({"mail"}, {"x"})) << "two limits met";
  EXPECT_TRUE(registry.one_concurrency_limit({"mail"}, {"t"}));
  EXPECT_FALSE(registry.one_concurrency_limit({"default"}, {"t"})) << "no limit met";
}

// The claim loop is told when claims may prefetch again, once per change: when the limits
// are lifted or the last keyed rate limit goes, not at a sync that finds one, nor at one
// that finds none again. Other limits leave prefetch on: a claimed job counts from its
// claim, held for a worker or not, against a concurrency limit (keyed or not), and an
// unkeyed rate limit's bucket counts the held ones (sql/functions/pgjobd_claim_limited.sql).
TEST(LimitRegistryTest, PrefetchIsAllowedUnlessAKeyedRateLimitAppliesAndOnLiftedSaysWhen) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  LimitRegistry registry(std::nullopt, "d2");
  int lifted = 0;
  registry.set_on_lifted([&] { ++lifted; });
  EXPECT_FALSE(registry.prefetch_allowed()) << "nothing read yet";
  registry.sync(*store);  // none in the database: active (assumed at start) turns false
  EXPECT_EQ(lifted, 1);
  EXPECT_TRUE(registry.prefetch_allowed());
  registry.sync(*store);
  EXPECT_EQ(lifted, 1) << "still none: nothing changed";
  database.table().set_limits({{"a", concurrency(1), "d1"}});
  registry.sync(*store);
  EXPECT_TRUE(registry.active());
  EXPECT_TRUE(registry.prefetch_allowed()) << "a concurrency limit allows prefetch";
  EXPECT_EQ(lifted, 1);
  database.table().set_limits({{"a", concurrency(1), "d1"}, {"r", rate(5), "d1"}});
  registry.sync(*store);
  EXPECT_TRUE(registry.prefetch_allowed()) << "an unkeyed rate limit allows prefetch";
  EXPECT_EQ(lifted, 1);
  // Beside the concurrency limit "a", a keyed limit k.
  const auto allowed_beside = [&](LimitConfig k) {
    k.key = "user";
    database.table().set_limits({{"a", concurrency(1), "d1"}, {"k", k, "d1"}});
    registry.sync(*store);
    return registry.prefetch_allowed();
  };
  EXPECT_TRUE(allowed_beside(concurrency(1))) << "a keyed concurrency limit allows prefetch";
  EXPECT_EQ(lifted, 1);
  EXPECT_FALSE(allowed_beside(rate(5))) << "a keyed rate limit keeps claims to free workers";
  EXPECT_EQ(lifted, 1);
  database.table().set_limits({{"a", concurrency(1), "d1"}});
  registry.sync(*store);
  EXPECT_TRUE(registry.prefetch_allowed());
  EXPECT_EQ(lifted, 2) << "the keyed rate limit went";
  LimitConfig keyed = rate(5);
  keyed.key = "user";
  database.table().set_limits({{"k", keyed, "d1"}});
  registry.sync(*store);
  EXPECT_FALSE(registry.prefetch_allowed());
  database.table().set_limits({});
  registry.sync(*store);
  EXPECT_FALSE(registry.active());
  EXPECT_EQ(lifted, 3);
}

// A configured keyed limit not written yet (another session holds the lock) keeps prefetch
// off: the limited claim applies it as soon as it is written.
TEST(LimitRegistryTest, APendingKeyedLimitKeepsPrefetchOff) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  LimitConfig keyed = rate(5);
  keyed.key = "user";
  LimitRegistry registry(LimitRegistry::Limits{{"r", keyed}}, "d1");
  database.table().fail_next(StoreMethod::kSyncLimits, 1);
  EXPECT_THROW(registry.sync(*store), DbError);
  registry.read_before_first_claim(*store);
  EXPECT_TRUE(registry.write_pending());
  EXPECT_TRUE(registry.active());
  EXPECT_FALSE(registry.prefetch_allowed());
}

// The claim session reads the limits before its first claim unless a read was applied
// already (a daemon with a section synced before starting its claim loop).
TEST(LimitRegistryTest, TheReadBeforeTheFirstClaimIsSkippedOnceAReadApplied) {
  FakeDatabase database;
  auto maintenance = database.open_store("maintenance", StoreUse::kOccasional);
  auto fetcher = database.open_store("fetcher", StoreUse::kHotPath);
  LimitRegistry registry(std::nullopt, "d2");
  registry.sync(*maintenance);
  registry.read_before_first_claim(*fetcher);
  EXPECT_EQ(database.table().calls(StoreMethod::kLoadLimits), 1);
  EXPECT_FALSE(registry.active());

  LimitRegistry unread(std::nullopt, "d3");
  database.table().fail_next(StoreMethod::kLoadLimits, 1);
  EXPECT_THROW(unread.sync(*maintenance), DbError);
  unread.read_before_first_claim(*fetcher);  // a failed read applied nothing
  EXPECT_EQ(database.table().calls(StoreMethod::kLoadLimits), 3);
  EXPECT_FALSE(unread.active());
}

// The claim session and the maintenance loop read on two connections, so the answers may
// come back in another order than the reads were asked: an answer to a read asked before
// the one applied is dropped, and the next read corrects what applies. (The fake answers
// when a held read is let go: here that answer stands for one that left the database
// before the claim session's.)
TEST(LimitRegistryTest, AnAnswerToAReadAskedBeforeTheAppliedOneIsDropped) {
  FakeDatabase database;
  auto maintenance = database.open_store("maintenance", StoreUse::kOccasional);
  auto fetcher = database.open_store("fetcher", StoreUse::kHotPath);
  LimitRegistry registry(std::nullopt, "d2");
  int lifted = 0;
  registry.set_on_lifted([&] { ++lifted; });
  database.table().block_role(StoreMethod::kLoadLimits, "maintenance");
  auto first_sync = std::async(std::launch::async, [&] { registry.sync(*maintenance); });
  ASSERT_TRUE(database.table().wait_held(StoreMethod::kLoadLimits));
  registry.read_before_first_claim(*fetcher);  // asked second, answered first: none
  EXPECT_FALSE(registry.active());
  EXPECT_EQ(lifted, 1);

  database.table().set_limits({{"a", concurrency(1), "d1"}});
  database.table().unblock(StoreMethod::kLoadLimits);
  first_sync.get();
  EXPECT_FALSE(registry.active()) << "the older answer overwrote the newer one";
  EXPECT_TRUE(registry.definitions().empty());
  registry.sync(*maintenance);  // the next read
  EXPECT_TRUE(registry.active());
  EXPECT_EQ(lifted, 1);
}

TEST(LimitRegistryTest, ADifferentDefinitionInTheDatabaseIsLoggedOnce) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  LimitRegistry registry(LimitRegistry::Limits{{"a", concurrency(3)}}, "d1");
  registry.sync(*store);
  LogCapture log;
  database.table().set_limits({{"a", concurrency(5), "d2"}});  // another daemon's write
  registry.sync(*store);
  registry.sync(*store);
  EXPECT_EQ(log.count("differ from this daemon's limits: section"), 1) << log.all();
  ASSERT_EQ(registry.definitions().size(), 1u);
  EXPECT_EQ(registry.definitions()[0].limit.concurrency, 5) << "the database's apply";
}

TEST(LimitRegistryTest, OverwritingAnotherDaemonsDefinitionIsAWarning) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  database.table().set_limits({{"a", concurrency(5), "d2"}});
  LogCapture log;
  LimitRegistry registry(LimitRegistry::Limits{{"a", concurrency(3)}}, "d1");
  registry.sync(*store);
  EXPECT_TRUE(log.contains("limit a changed: its definition by d2 differed")) << log.all();
}

TEST(LimitRegistryTest, AFailedWriteStaysPending) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  database.table().fail_next(StoreMethod::kSyncLimits, 1);
  LimitRegistry registry(LimitRegistry::Limits{{"a", concurrency(3)}}, "d1");
  EXPECT_THROW(registry.sync(*store), DbError);
  EXPECT_TRUE(registry.write_pending());
  EXPECT_TRUE(registry.active());
  registry.sync(*store);
  EXPECT_FALSE(registry.write_pending());
}

// Another session holds the limits' lock: the write stays pending, said once with what
// holds it, and limits stay active although the database holds none yet (the section will
// be written); once the lock is free the write goes through and says how long it waited.
TEST(LimitRegistryTest, AWriteAnotherSessionsLockKeepsOutStaysPendingAndLimitsStayActive) {
  FakeDatabase database;
  auto store = database.open_store("maintenance", StoreUse::kOccasional);
  database.table().set_limits_busy("the advisory lock pgjobd_limits_sync, held by pid 4242");
  LogCapture log;
  LimitRegistry registry(LimitRegistry::Limits{{"a", concurrency(3)}}, "d1");
  registry.sync(*store);
  registry.sync(*store);
  EXPECT_TRUE(registry.write_pending());
  EXPECT_TRUE(registry.active()) << "the section is not written yet";
  EXPECT_TRUE(database.table().limits().empty());
  EXPECT_EQ(log.count("another session holds the advisory lock pgjobd_limits_sync, held by "
                      "pid 4242"),
            1)
      << log.all();
  EXPECT_FALSE(log.contains("differ from this daemon's limits: section"))
      << "not written yet is not another daemon's section\n"
      << log.all();
  database.table().set_limits_busy("");
  registry.sync(*store);
  EXPECT_FALSE(registry.write_pending());
  EXPECT_EQ(database.table().limits().size(), 1u);
  EXPECT_TRUE(log.contains("limits: written after")) << log.all();
}

}  // namespace
}  // namespace pgjobd
