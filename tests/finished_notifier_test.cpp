// FinishedNotifier: the jobs a batch ended are announced, in payloads PostgreSQL accepts,
// in one call for everything that arrived meanwhile; when the session is down or too many
// wait, they are dropped and counted, never kept without bound.

#include "engine/finished_notifier.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/completer.hpp"
#include "engine/health.hpp"
#include "metrics/metrics.hpp"
#include "support/fake_job_store.hpp"
#include "support/metrics_text.hpp"

namespace pgjobd {
namespace {

using pgjobd::testing::FakeDatabase;
using pgjobd::testing::FakeJobTable;
using pgjobd::testing::StoreMethod;

// The ids the payloads name, in order, each payload checked for its schema and size.
std::vector<std::int64_t> ids_in(const std::vector<std::string>& payloads,
                                 const std::string& schema = "app") {
  std::vector<std::int64_t> ids;
  for (const std::string& payload : payloads) {
    EXPECT_LE(payload.size(), FinishedNotifier::kMaxPayloadBytes);
    const nlohmann::json json = nlohmann::json::parse(payload);
    EXPECT_EQ(json.at("schema"), schema);
    for (const auto& id : json.at("ids")) ids.push_back(id.get<std::int64_t>());
  }
  return ids;
}

std::vector<std::int64_t> ids_announced(const FakeJobTable& table) {
  std::vector<std::int64_t> ids;
  for (const auto& call : table.announced()) {
    for (const std::int64_t id : ids_in(call)) ids.push_back(id);
  }
  return ids;
}

double unannounced(const Metrics& metrics) {
  const std::string text = testing::scrape(metrics);
  const std::string name = "pgjobd_finished_unannounced_total ";
  const auto at = text.find("\n" + name);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + 1 + name.size()));
}

class FinishedNotifierTest : public ::testing::Test {
 protected:
  void TearDown() override { table_.unblock_all(); }

  FinishedNotifier& make_notifier() {
    notifier_ = std::make_unique<FinishedNotifier>(
        database_.open_store("finished notifier", StoreUse::kOccasional), "app", metrics_);
    return *notifier_;
  }

  // A started notifier whose first send, announcing `first`, is held in the store until
  // table_.unblock(StoreMethod::kAnnounceFinished).
  FinishedNotifier& start_with_a_send_in_flight(std::int64_t first) {
    FinishedNotifier& notifier = make_notifier();
    table_.block(StoreMethod::kAnnounceFinished);
    notifier.start();
    notifier.job_ended(first);
    EXPECT_TRUE(table_.wait_held(StoreMethod::kAnnounceFinished));
    return notifier;
  }

  FakeDatabase database_;
  FakeJobTable& table_ = database_.table();
  Metrics metrics_{{"default"}, {"t"}};
  std::unique_ptr<FinishedNotifier> notifier_;  // last
};

TEST(FinishedNotifierPayloads, OneSmallBatchIsOnePayloadInTheDocumentedForm) {
  EXPECT_EQ(FinishedNotifier::payloads("app", {1, 22, 333}),
            std::vector<std::string>{R"({"schema":"app","ids":[1,22,333]})"});
  EXPECT_EQ(FinishedNotifier::payloads("we\"ird", {7}),
            std::vector<std::string>{R"({"schema":"we\"ird","ids":[7]})"});
  EXPECT_TRUE(FinishedNotifier::payloads("app", {}).empty());
}

// PostgreSQL refuses a payload of 8000 bytes: 5000 ids of 19 digits (100 KB) are split into
// payloads under the bound that carry every id once, in order.
TEST(FinishedNotifierPayloads, ManyIdsAreSplitUnderThePayloadBound) {
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < 5000; ++i) ids.push_back(1'000'000'000'000'000'000 + i);
  const auto payloads = FinishedNotifier::payloads("app", ids);
  EXPECT_GE(payloads.size(), 13u);
  EXPECT_EQ(ids_in(payloads), ids);
  // Filled up to the bound, not split early.
  EXPECT_GT(payloads.front().size(), FinishedNotifier::kMaxPayloadBytes - 21);
}

TEST_F(FinishedNotifierTest, AnnouncesTheJobsABatchEndedButNotRetriesReleasesOrHeldOnes) {
  FinishedNotifier& notifier = make_notifier();
  notifier.start();
  const std::vector<Completion> batch = {
      {{1, 1}, Outcome::kDone, {}, Millis(0)},      {{2, 1}, Outcome::kRetry, "x", Millis(10)},
      {{3, 5}, Outcome::kDead, "x", Millis(0)},     {{4, 1}, Outcome::kReleased, {}, Millis(0)},
      {{5, 1}, Outcome::kCancelled, {}, Millis(0)}, {{6, 1}, Outcome::kDone, {}, Millis(0)},
      {{7, 1}, Outcome::kDone, {}, Millis(0)},  // beyond `settled`: not written yet
  };
  notifier.completions_written(batch, 6, {{6, 1}});
  ASSERT_TRUE(table_.wait_until([&] { return !table_.announced().empty(); }));
  EXPECT_EQ(ids_announced(table_), (std::vector<std::int64_t>{1, 3, 5}));
  notifier.job_ended(42);  // the sql handler's own completion
  ASSERT_TRUE(table_.wait_until([&] { return table_.announced().size() == 2; }));
  EXPECT_EQ(ids_announced(table_), (std::vector<std::int64_t>{1, 3, 5, 42}));
  EXPECT_EQ(unannounced(metrics_), 0);
}

// What arrives while a send is in flight goes out together in the next one: one transaction
// however many batches the completer wrote meanwhile.
TEST_F(FinishedNotifierTest, WhatArrivesDuringASendGoesOutInOneCall) {
  FinishedNotifier& notifier = start_with_a_send_in_flight(1);
  for (std::int64_t id = 2; id <= 50; ++id) notifier.job_ended(id);
  table_.unblock(StoreMethod::kAnnounceFinished);
  ASSERT_TRUE(table_.wait_until([&] { return ids_announced(table_).size() == 50; }));
  const auto calls = table_.announced();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(ids_in(calls[1]).size(), 49u);
  EXPECT_EQ(calls[1].size(), 1u);  // one payload
}

// A lost session loses the announcement, counted, and the next ones go out once it is back.
TEST_F(FinishedNotifierTest, ASendThatFailsIsDroppedAndCountedAndTheNextGoesOut) {
  FinishedNotifier& notifier = make_notifier();
  table_.fail_next(StoreMethod::kAnnounceFinished, 1);
  notifier.start();
  notifier.job_ended(1);
  notifier.job_ended(2);
  // 1 and 2 may go out in one failed send, or 1 alone in it and 2 in the next: either way
  // each is accounted for once, announced or counted.
  ASSERT_TRUE(table_.wait_until([&] {
    return unannounced(metrics_) >= 1 &&
           unannounced(metrics_) + static_cast<double>(ids_announced(table_).size()) == 2;
  }));
  notifier.job_ended(3);
  ASSERT_TRUE(table_.wait_until([&] {
    const auto ids = ids_announced(table_);
    return !ids.empty() && ids.back() == 3;
  }));
  EXPECT_EQ(unannounced(metrics_) + static_cast<double>(ids_announced(table_).size()), 3);
}

// The completer never waits and the queue never grows past its bound: with the session
// stuck, ids beyond kMaxQueued are dropped and counted at once.
TEST_F(FinishedNotifierTest, IdsBeyondTheQueueBoundAreDroppedAndCounted) {
  FinishedNotifier& notifier = start_with_a_send_in_flight(0);
  std::vector<Completion> batch;
  for (std::size_t i = 1; i <= FinishedNotifier::kMaxQueued + 10; ++i) {
    batch.push_back({{static_cast<std::int64_t>(i), 1}, Outcome::kDone, {}, Millis(0)});
  }
  notifier.completions_written(batch, batch.size(), {});
  EXPECT_EQ(unannounced(metrics_), 10);
  table_.unblock(StoreMethod::kAnnounceFinished);
  ASSERT_TRUE(table_.wait_until(
      [&] { return ids_announced(table_).size() == FinishedNotifier::kMaxQueued + 1; }));
}

TEST_F(FinishedNotifierTest, DisabledItAnnouncesNothing) {
  FinishedNotifier& notifier = make_notifier();
  notifier.set_enabled(false);
  notifier.start();
  notifier.job_ended(1);
  notifier.stop();
  EXPECT_EQ(table_.calls(StoreMethod::kAnnounceFinished), 0);
}

// The completer's hook: what it wrote is announced after its write, held rows once written.
TEST_F(FinishedNotifierTest, TheCompleterFeedsItAfterEachWrite) {
  FinishedNotifier& notifier = make_notifier();
  Health health;
  Completer completer(database_.open_store("completer", StoreUse::kHotPath), "worker-1", false,
                      metrics_, health);
  completer.set_on_settled([&](const std::vector<Completion>& batch, std::size_t settled,
                               const std::vector<JobAttempt>& held) {
    notifier.completions_written(batch, settled, held);
  });
  table_.add_jobs(3, "t");
  auto store = database_.open_store("test", StoreUse::kOccasional);
  const auto jobs = store->claim({{{"default", 3}}, {"t"}, 3, "worker-1", Millis(30000)});
  ASSERT_EQ(jobs.size(), 3u);
  notifier.start();
  completer.start();
  completer.submit({{jobs[0].id, jobs[0].attempt}, Outcome::kDone, {}, Millis(0)});
  completer.submit({{jobs[1].id, jobs[1].attempt}, Outcome::kRetry, "x", Millis(1000)});
  completer.submit({{jobs[2].id, jobs[2].attempt}, Outcome::kDead, "x", Millis(0)});
  ASSERT_TRUE(table_.wait_until([&] { return ids_announced(table_).size() == 2; }));
  EXPECT_EQ(ids_announced(table_), (std::vector<std::int64_t>{jobs[0].id, jobs[2].id}));
  completer.stop();
}

// Stopping sends what is queued: the drain's last batches are announced.
TEST_F(FinishedNotifierTest, StoppingSendsWhatIsQueued) {
  FinishedNotifier& notifier = start_with_a_send_in_flight(1);
  notifier.job_ended(2);
  notifier.request_stop();
  table_.unblock(StoreMethod::kAnnounceFinished);
  notifier.join();
  EXPECT_EQ(ids_announced(table_), (std::vector<std::int64_t>{1, 2}));
}

}  // namespace
}  // namespace pgjobd
