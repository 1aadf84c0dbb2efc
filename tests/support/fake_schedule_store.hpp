#pragma once
// An in-memory ScheduleStore with the real one's compare-and-set, for scheduler unit tests:
// the rows, the jobs each fire inserted, and switches to make calls fail.

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "store/schedule_store.hpp"

namespace pgjobd::testing {

struct FakeScheduledJob {
  std::string schedule;
  TickTime tick;
  bool late = false;
  bool live = true;  // pending/running: overlap: skip waits for it
};

class FakeScheduleTable {
 public:
  void put(const ScheduleRow& row);
  std::vector<ScheduleRow> rows();
  std::vector<FakeScheduledJob> jobs();
  // Marks every job of `schedule` finished.
  void finish_jobs(const std::string& schedule);
  int calls();  // load and fire calls so far
  void set_failing(bool failing);
  // load() throws std::runtime_error, not a DbError (a bug, a library's own exception).
  void set_throwing(bool throwing);
  // While held, fire() of `name` answers kHeld (another session holds its row; pid 4242),
  // and a reconcile() fails as the real one does after its lock wait.
  void set_held(const std::string& name, bool held);

  std::vector<ScheduleRow> load();
  FireResult fire(const FireRequest& request);
  std::optional<int> row_holder(const std::string& name);
  ReconcileReport reconcile(const std::map<std::string, ScheduleConfig>& schedules, TickTime now);

 private:
  std::mutex mutex_;
  std::vector<ScheduleRow> rows_;
  std::vector<FakeScheduledJob> jobs_;
  std::vector<std::size_t> last_job_;  // per row: index into jobs_ + 1, 0 = none
  int calls_ = 0;
  bool failing_ = false;
  bool throwing_ = false;
  std::set<std::string> held_;
};

class FakeScheduleStore final : public ScheduleStore {
 public:
  explicit FakeScheduleStore(std::shared_ptr<FakeScheduleTable> table) : table_(std::move(table)) {}
  std::vector<ScheduleRow> load_schedules() override { return table_->load(); }
  FireResult fire(const FireRequest& request) override { return table_->fire(request); }
  std::optional<int> row_holder(const std::string& name) override {
    return table_->row_holder(name);
  }
  ReconcileReport reconcile(const std::map<std::string, ScheduleConfig>& schedules) override;

 private:
  std::shared_ptr<FakeScheduleTable> table_;
};

}  // namespace pgjobd::testing
