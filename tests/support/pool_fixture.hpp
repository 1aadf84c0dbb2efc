#pragma once
// A fixture for the engine parts that work beside a pool (the maintenance loop, the lease
// renewer): a fake database, a pool of gated jobs whose outcomes go to a real completer,
// and run_jobs() to put claimed jobs on it.

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/completer.hpp"
#include "engine/health.hpp"
#include "engine/worker_pool.hpp"
#include "metrics/metrics.hpp"
#include "support/fake_job_store.hpp"
#include "support/job_gate.hpp"

namespace pgjobd::testing {

class PoolFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    WorkerConfig workers;
    workers.concurrency = 4;
    completer_ = std::make_unique<Completer>(database_.open_store("completer", StoreUse::kHotPath),
                                             "worker-1", false, metrics_, health_);
    pool_ = std::make_unique<WorkerPool>(
        workers, [this](const Job& job, const JobStop& stop) { return gate_.execute(job, stop); },
        [this](Completion completion) { completer_->submit(std::move(completion)); },
        [](int, bool) {});
    completer_->start();
    pool_->start();
  }
  void TearDown() override {
    table_.unblock_all();
    gate_.release_all();
  }

  // `n` jobs claimed by worker-1 (lease 300 ms) and running in the pool.
  std::vector<JobAttempt> run_jobs(int n) {
    table_.add_jobs(n, "gated");
    auto store = database_.open_store("test", StoreUse::kOccasional);
    auto jobs = store->claim({{{"default", n}}, {"gated"}, n, "worker-1", Millis(300)});
    std::vector<JobAttempt> attempts;
    for (const Job& job : jobs) attempts.push_back({job.id, job.attempt});
    const int already = static_cast<int>(gate_.started().size());
    pool_->submit(std::move(jobs));
    EXPECT_TRUE(gate_.wait_started(already + n));
    return attempts;
  }

  FakeDatabase database_;
  FakeJobTable& table_ = database_.table();
  Metrics metrics_{{"default"}, {"gated"}};
  Health health_;
  JobGate gate_;
  // Destroyed from the last up: the part under test (in the derived fixture), pool (its
  // jobs hand over to the completer), completer.
  std::unique_ptr<Completer> completer_;
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace pgjobd::testing
