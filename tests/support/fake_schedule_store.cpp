// FakeScheduleTable: the schedules table's rules (compare-and-set on last_tick, overlap,
// YAML reconciliation) over a vector.
#include "support/fake_schedule_store.hpp"

#include <algorithm>
#include <stdexcept>

namespace pgjobd::testing {

void FakeScheduleTable::put(const ScheduleRow& row) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].name == row.name) {
      rows_[i] = row;
      return;
    }
  }
  rows_.push_back(row);
  last_job_.push_back(0);
}

std::vector<ScheduleRow> FakeScheduleTable::rows() {
  std::lock_guard lock(mutex_);
  return rows_;
}

std::vector<FakeScheduledJob> FakeScheduleTable::jobs() {
  std::lock_guard lock(mutex_);
  return jobs_;
}

void FakeScheduleTable::finish_jobs(const std::string& schedule) {
  std::lock_guard lock(mutex_);
  for (FakeScheduledJob& job : jobs_) {
    if (job.schedule == schedule) job.live = false;
  }
}

int FakeScheduleTable::calls() {
  std::lock_guard lock(mutex_);
  return calls_;
}

void FakeScheduleTable::set_failing(bool failing) {
  std::lock_guard lock(mutex_);
  failing_ = failing;
}

void FakeScheduleTable::set_throwing(bool throwing) {
  std::lock_guard lock(mutex_);
  throwing_ = throwing;
}

void FakeScheduleTable::set_held(const std::string& name, bool held) {
  std::lock_guard lock(mutex_);
  if (held) {
    held_.insert(name);
  } else {
    held_.erase(name);
  }
}

std::optional<int> FakeScheduleTable::row_holder(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (held_.count(name) == 0) return std::nullopt;
  return 4242;
}

std::vector<ScheduleRow> FakeScheduleTable::load() {
  std::lock_guard lock(mutex_);
  ++calls_;
  if (throwing_) throw std::runtime_error("fake: not a database error");
  if (failing_) throw DbError("fake: connection lost", "", true);
  return rows_;
}

FireResult FakeScheduleTable::fire(const FireRequest& request) {
  std::lock_guard lock(mutex_);
  ++calls_;
  if (failing_) throw DbError("fake: connection lost", "", true);
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    ScheduleRow& row = rows_[i];
    if (row.name != request.name) continue;
    if (held_.count(row.name) != 0) return FireResult::kHeld;
    if (row.last_tick != request.expected_last_tick || request.tick <= row.last_tick ||
        !(row.timing == request.timing) || !row.active()) {
      return FireResult::kLost;
    }
    FireResult result = FireResult::kAdvanced;
    if (request.insert_job) {
      if (row.overlap_skip && last_job_[i] != 0 && jobs_[last_job_[i] - 1].live) {
        result = FireResult::kSkippedOverlap;
      } else {
        jobs_.push_back({row.name, request.tick, request.late, true});
        last_job_[i] = jobs_.size();
        result = FireResult::kFired;
      }
    }
    row.last_tick = request.tick;
    row.next_tick = request.next_tick;
    return result;
  }
  return FireResult::kLost;
}

ReconcileReport FakeScheduleTable::reconcile(const std::map<std::string, ScheduleConfig>& schedules,
                                             TickTime now) {
  std::lock_guard lock(mutex_);
  ++calls_;
  if (failing_) throw DbError("fake: connection lost", "", true);
  if (!held_.empty()) {
    throw DbError("fake: canceling statement due to lock timeout", ScheduleStore::kLockNotAvailable,
                  false);
  }
  ReconcileReport report;
  for (const auto& [name, s] : schedules) {
    auto it = std::find_if(rows_.begin(), rows_.end(),
                           [&](const ScheduleRow& r) { return r.name == name; });
    if (it != rows_.end() && it->source == "sql") {
      report.held_by_sql.push_back(name);
      continue;
    }
    ScheduleRow row = yaml_schedule_row(name, s);
    const bool added = it == rows_.end();
    if (!added && same_definition(*it, row)) continue;  // unchanged: nothing written
    const bool retimed = !added && (!(it->timing == row.timing) || (!it->enabled && s.enabled));
    if (!added) {
      row.paused = it->paused;
      row.last_tick = it->last_tick;
      row.next_tick = it->next_tick;
    }
    if (added || retimed) row.last_tick = std::max(row.last_tick, now);
    if (added) {
      rows_.push_back(row);
      last_job_.push_back(0);
      ++report.added;
    } else {
      *it = row;
      ++report.changed;
    }
  }
  for (std::size_t i = rows_.size(); i-- > 0;) {
    if (rows_[i].source == "yaml" && schedules.count(rows_[i].name) == 0) {
      rows_.erase(rows_.begin() + static_cast<std::ptrdiff_t>(i));
      last_job_.erase(last_job_.begin() + static_cast<std::ptrdiff_t>(i));
      ++report.removed;
    }
  }
  return report;
}

ReconcileReport FakeScheduleStore::reconcile(
    const std::map<std::string, ScheduleConfig>& schedules) {
  return table_->reconcile(
      schedules, std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now()));
}

}  // namespace pgjobd::testing
