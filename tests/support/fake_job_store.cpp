// FakeJobTable, FakeJobStore and FakeDatabase: the in-memory jobs table and its calls.

#include "support/fake_job_store.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

namespace pgjobd::testing {

namespace {

std::size_t index_of(StoreMethod method) { return static_cast<std::size_t>(method); }

const char* name_of(StoreMethod method) {
  switch (method) {
    case StoreMethod::kClaim:
      return "claim";
    case StoreMethod::kComplete:
      return "complete";
    case StoreMethod::kRunAndComplete:
      return "run_and_complete";
    case StoreMethod::kHeartbeat:
      return "heartbeat";
    case StoreMethod::kLeadAndRescue:
      return "lead_and_rescue";
    case StoreMethod::kResign:
      return "resign";
    case StoreMethod::kPrune:
      return "prune";
    case StoreMethod::kRepairDependencies:
      return "repair_dependencies";
    case StoreMethod::kQueueStats:
      return "queue_stats";
    case StoreMethod::kPausedQueues:
      return "paused_queues";
    case StoreMethod::kSchemaProblem:
      return "schema_problem";
    case StoreMethod::kNextDue:
      return "next_due";
    case StoreMethod::kClaimLimited:
      return "claim_limited";
    case StoreMethod::kSyncLimits:
      return "sync_limits";
    case StoreMethod::kLoadLimits:
      return "load_limits";
    case StoreMethod::kLimitUsage:
      return "limit_usage";
    case StoreMethod::kLimitGarbage:
      return "collect_limit_garbage";
    case StoreMethod::kReportDaemon:
      return "report_daemon";
    case StoreMethod::kRemoveDaemon:
      return "remove_daemon";
    case StoreMethod::kExpireDaemons:
      return "expire_daemons";
    case StoreMethod::kSyncDeadLetters:
      return "sync_dead_letters";
    case StoreMethod::kClaimIds:
      return "claim_ids";
    case StoreMethod::kAnnounceFinished:
      return "announce_finished";
  }
  return "?";
}

const char* name_of(FakeStatus status) {
  switch (status) {
    case FakeStatus::kPending:
      return "pending";
    case FakeStatus::kRunning:
      return "running";
    case FakeStatus::kDone:
      return "done";
    case FakeStatus::kFailed:
      return "failed";
    case FakeStatus::kDead:
      return "dead";
    case FakeStatus::kCancelled:
      return "cancelled";
  }
  return "?";
}

bool contains(const std::vector<std::string>& values, const std::string& value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

}  // namespace

// ---- FakeJobTable: rows ---------------------------------------------------------------

std::int64_t FakeJobTable::add_job(const std::string& type, const std::string& queue, int priority,
                                   int max_attempts) {
  std::lock_guard lock(mutex_);
  FakeRow row;
  row.job.id = next_id_++;
  row.job.type = type;
  row.job.queue = queue;
  row.job.priority = priority;
  row.job.max_attempts = max_attempts;
  row.job.attempt = 0;
  rows_[row.job.id] = row;
  changed();
  return row.job.id;
}

std::int64_t FakeJobTable::add_job_at(const std::string& type, Clock::time_point run_at,
                                      const std::string& queue) {
  const std::int64_t id = add_job(type, queue);
  std::lock_guard lock(mutex_);
  rows_.at(id).run_at = run_at;
  changed();
  return id;
}

std::vector<std::int64_t> FakeJobTable::add_jobs(int n, const std::string& type,
                                                 const std::string& queue) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(add_job(type, queue));
  return ids;
}

FakeRow FakeJobTable::row(std::int64_t id) const {
  std::lock_guard lock(mutex_);
  return rows_.at(id);
}

int FakeJobTable::count(FakeStatus status) const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(std::count_if(rows_.begin(), rows_.end(), [&](const auto& entry) {
    return entry.second.status == status && !entry.second.deleted;
  }));
}

void FakeJobTable::take_over(std::int64_t id, const std::string& other_worker) {
  std::lock_guard lock(mutex_);
  FakeRow& row = rows_.at(id);
  row.status = FakeStatus::kRunning;
  row.locked_by = other_worker;
  ++row.job.attempt;
  changed();
}

std::string FakeJobTable::request_cancel(std::int64_t id) {
  std::lock_guard lock(mutex_);
  FakeRow& row = rows_.at(id);
  if (row.status == FakeStatus::kPending || row.status == FakeStatus::kFailed) {
    row.status = FakeStatus::kCancelled;
  } else if (row.status == FakeStatus::kRunning) {
    row.cancel_requested = true;
  }
  changed();
  return name_of(row.status);
}

FakeRow* FakeJobTable::find(std::int64_t id) {
  const auto it = rows_.find(id);
  return it == rows_.end() || it->second.deleted ? nullptr : &it->second;
}

bool FakeJobTable::owned(const FakeRow& row, const JobAttempt& job,
                         const std::string& worker) const {
  return row.status == FakeStatus::kRunning && row.locked_by == worker &&
         row.job.attempt == job.attempt;
}

// ---- FakeJobTable: faults -------------------------------------------------------------

void FakeJobTable::poison_completion(std::int64_t id) {
  std::lock_guard lock(mutex_);
  poisoned_.insert(id);
}

void FakeJobTable::hold_row(std::int64_t id) {
  std::lock_guard lock(mutex_);
  row_held_.insert(id);
  changed();
}

void FakeJobTable::hold_row_once(std::int64_t id) {
  std::lock_guard lock(mutex_);
  row_held_once_.insert(id);
  changed();
}

void FakeJobTable::release_row(std::int64_t id) {
  std::lock_guard lock(mutex_);
  row_held_.erase(id);
  changed();
}

void FakeJobTable::fail_next(StoreMethod method, int n, const std::string& sqlstate) {
  std::lock_guard lock(mutex_);
  fail_[index_of(method)] = n;
  fail_sqlstate_[index_of(method)] = sqlstate;
  changed();
}

void FakeJobTable::throw_next(StoreMethod method, int n) {
  std::lock_guard lock(mutex_);
  throw_[index_of(method)] = n;
  changed();
}

void FakeJobTable::block(StoreMethod method) {
  std::lock_guard lock(mutex_);
  blocked_[index_of(method)] = true;
  changed();
}

void FakeJobTable::block_role(StoreMethod method, const std::string& role) {
  std::lock_guard lock(mutex_);
  blocked_roles_[index_of(method)].insert(role);
  changed();
}

void FakeJobTable::unblock(StoreMethod method) {
  std::lock_guard lock(mutex_);
  blocked_[index_of(method)] = false;
  blocked_roles_[index_of(method)].clear();
  changed();
}

void FakeJobTable::unblock_all() {
  std::lock_guard lock(mutex_);
  blocked_.fill(false);
  for (auto& roles : blocked_roles_) roles.clear();
  changed();
}

int FakeJobTable::held(StoreMethod method) const {
  std::lock_guard lock(mutex_);
  return held_[index_of(method)];
}

void FakeJobTable::set_leader(bool leader) {
  std::lock_guard lock(mutex_);
  leader_ = leader;
  changed();
}

void FakeJobTable::set_prune_backlog(int rows, Millis per_slice) {
  std::lock_guard lock(mutex_);
  prune_backlog_ = rows;
  prune_per_slice_ = per_slice;
  changed();
}

int FakeJobTable::prune_backlog() const {
  std::lock_guard lock(mutex_);
  return prune_backlog_;
}

void FakeJobTable::set_completion_news(std::vector<std::int64_t> unblocked, bool other_due,
                                       int notify_pid) {
  std::lock_guard lock(mutex_);
  completion_news_.unblocked = std::move(unblocked);
  completion_news_.other_due = other_due;
  completion_news_.notify_pid = notify_pid;
}

void FakeJobTable::set_schema_problem(std::string problem) {
  std::lock_guard lock(mutex_);
  schema_problem_ = std::move(problem);
  changed();
}

void FakeJobTable::set_claim_ignores_filters(bool ignore) {
  std::lock_guard lock(mutex_);
  claim_ignores_filters_ = ignore;
  changed();
}

void FakeJobTable::set_queue_stats(std::vector<QueueStatsRow> rows) {
  std::lock_guard lock(mutex_);
  stats_override_ = std::move(rows);
  changed();
}

void FakeJobTable::set_paused_queues(std::vector<std::string> queues) {
  std::lock_guard lock(mutex_);
  paused_queues_ = std::move(queues);
  changed();
}

void FakeJobTable::set_limits(std::vector<LimitDefinition> limits) {
  std::lock_guard lock(mutex_);
  limits_ = std::move(limits);
  changed();
}

std::vector<LimitDefinition> FakeJobTable::limits() const {
  std::lock_guard lock(mutex_);
  return limits_;
}

void FakeJobTable::set_rate_hold(const std::string& limit,
                                 std::optional<std::chrono::microseconds> retry_in) {
  std::lock_guard lock(mutex_);
  if (retry_in) {
    rate_holds_[limit] = *retry_in;
  } else {
    rate_holds_.erase(limit);
  }
  changed();
}

std::vector<std::map<std::string, DeadLetterConfig>> FakeJobTable::dead_letter_syncs() const {
  std::lock_guard lock(mutex_);
  return dead_letter_syncs_;
}

std::vector<std::map<std::string, LimitConfig>> FakeJobTable::limit_syncs() const {
  std::lock_guard lock(mutex_);
  return limit_syncs_;
}

void FakeJobTable::set_limits_busy(std::string holder) {
  std::lock_guard lock(mutex_);
  limits_busy_ = std::move(holder);
}

std::vector<std::vector<std::string>> FakeJobTable::stats_queues() const {
  std::lock_guard lock(mutex_);
  return stats_queues_;
}

std::unique_lock<std::mutex> FakeJobTable::enter(StoreMethod method, const std::string& role) {
  const std::size_t i = index_of(method);
  std::unique_lock lock(mutex_);
  ++calls_[i];
  call_times_[i].push_back(Clock::now());
  changed();
  const auto blocked = [&] { return blocked_[i] || blocked_roles_[i].count(role) > 0; };
  if (blocked()) {
    ++held_[i];
    changed();
    cv_.wait(lock, [&] { return !blocked(); });
    --held_[i];
    changed();
  }
  if (throw_[i] > 0) {
    --throw_[i];
    changed();
    throw std::runtime_error(std::string("fake ") + name_of(method) + ": not a database error");
  }
  if (fail_[i] > 0) {
    --fail_[i];
    changed();
    if (!fail_sqlstate_[i].empty()) {
      throw DbError(std::string("fake ") + name_of(method) + ": refused", fail_sqlstate_[i], false);
    }
    throw DbError(std::string("fake ") + name_of(method) + ": connection lost", "08006", true);
  }
  return lock;
}

void FakeJobTable::changed() {
  ++version_;
  cv_.notify_all();
}

// ---- FakeJobTable: records and waits --------------------------------------------------

int FakeJobTable::calls(StoreMethod method) const {
  std::lock_guard lock(mutex_);
  return calls_[index_of(method)];
}

std::vector<FakeJobTable::Clock::time_point> FakeJobTable::call_times(StoreMethod method) const {
  std::lock_guard lock(mutex_);
  return call_times_[index_of(method)];
}

std::vector<ClaimRequest> FakeJobTable::claim_requests() const {
  std::lock_guard lock(mutex_);
  return claim_requests_;
}

int FakeJobTable::plain_claims() const {
  std::lock_guard lock(mutex_);
  return plain_claims_;
}

std::vector<CompleteCall> FakeJobTable::completed() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

std::vector<Completion> FakeJobTable::completions() const {
  std::lock_guard lock(mutex_);
  std::vector<Completion> all;
  for (const auto& call : completed_) all.insert(all.end(), call.batch.begin(), call.batch.end());
  return all;
}

std::vector<std::vector<JobAttempt>> FakeJobTable::heartbeats() const {
  std::lock_guard lock(mutex_);
  return heartbeats_;
}

std::vector<std::vector<std::string>> FakeJobTable::announced() const {
  std::lock_guard lock(mutex_);
  return announced_;
}

std::vector<std::string> FakeJobTable::resigned() const {
  std::lock_guard lock(mutex_);
  return resigned_;
}

std::map<std::string, StoreUse> FakeJobTable::opened_uses() const {
  std::lock_guard lock(mutex_);
  return opened_uses_;
}

std::vector<std::string> FakeJobTable::opened_roles() const {
  std::lock_guard lock(mutex_);
  return opened_roles_;
}

int FakeJobTable::listen_sessions_opened() const {
  std::lock_guard lock(mutex_);
  return listen_opened_;
}

int FakeJobTable::listen_sessions_closed() const {
  std::lock_guard lock(mutex_);
  return listen_closed_;
}

int FakeJobTable::notifications_delivered() const {
  std::lock_guard lock(mutex_);
  return delivered_;
}

bool FakeJobTable::wait_until(const std::function<bool()>& condition,
                              std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(mutex_);
  while (true) {
    // The version is read before the condition is evaluated (without the lock, since it
    // may call the accessors), so a change in between is never missed.
    const std::uint64_t seen = version_;
    lock.unlock();
    if (condition()) return true;
    lock.lock();
    if (!cv_.wait_until(lock, deadline, [&] { return version_ != seen; })) {
      lock.unlock();
      return condition();
    }
  }
}

bool FakeJobTable::wait_calls(StoreMethod method, int n, std::chrono::milliseconds timeout) const {
  return wait_until([&] { return calls(method) >= n; }, timeout);
}

bool FakeJobTable::wait_held(StoreMethod method, int n, std::chrono::milliseconds timeout) const {
  return wait_until([&] { return held(method) >= n; }, timeout);
}

// ---- FakeJobStore ---------------------------------------------------------------------

std::vector<Job> FakeJobStore::claim(const ClaimRequest& request) {
  auto lock = table_->enter(StoreMethod::kClaim, role_);
  ++table_->plain_claims_;
  return claim_locked(request, nullptr, FakeJobTable::Clock::now());
}

// As the real statement: one call (counted as kClaim), one clock for the claim and for
// the answer, which only a short claim gives.
ClaimWithDue FakeJobStore::claim_with_due(const ClaimRequest& request,
                                          const std::vector<std::string>& due_queues) {
  auto lock = table_->enter(StoreMethod::kClaim, role_);
  const auto now = FakeJobTable::Clock::now();
  ClaimWithDue claim;
  claim.jobs = claim_locked(request, nullptr, now);
  if (!due_queues.empty() && static_cast<int>(claim.jobs.size()) < request.limit) {
    claim.due = due_locked(due_queues, request.types, now, now);
  }
  return claim;
}

LimitedClaim FakeJobStore::claim_limited(const ClaimRequest& request) {
  auto lock = table_->enter(StoreMethod::kClaimLimited, role_);
  LimitedClaim claim;
  claim.jobs = claim_locked(request, &claim.held, FakeJobTable::Clock::now());
  return claim;
}

std::vector<Job> FakeJobStore::claim_ids(const ClaimRequest& request,
                                         const std::vector<std::int64_t>& ids) {
  auto lock = table_->enter(StoreMethod::kClaimIds, role_);
  return claim_locked(request, nullptr, FakeJobTable::Clock::now(), &ids);
}

std::vector<Job> FakeJobStore::claim_locked(const ClaimRequest& request,
                                            std::vector<LimitHold>* held,
                                            FakeJobTable::Clock::time_point now,
                                            const std::vector<std::int64_t>* only) {
  // As the real plain claims: they take nothing once a limit exists.
  if (held == nullptr && !table_->limits_.empty()) throw LimitsExist();
  table_->claim_requests_.push_back(request);
  // Running jobs per limited type now, and the limits by type (unkeyed concurrency only).
  std::map<std::string, const LimitDefinition*> limit_of_type;
  std::map<std::string, int> running;
  if (held != nullptr) {
    for (const LimitDefinition& limit : table_->limits_) {
      for (const std::string& type : limit.limit.types) limit_of_type[type] = &limit;
    }
    for (const auto& [id, row] : table_->rows_) {
      const auto limit = limit_of_type.find(row.job.type);
      if (row.status == FakeStatus::kRunning && limit != limit_of_type.end()) {
        ++running[limit->second->name];
      }
    }
  }
  const auto hold = [&](const std::string& limit, const std::string& reason,
                        std::optional<std::chrono::microseconds> retry_in) {
    for (const LimitHold& h : *held) {
      if (h.limit == limit) return;
    }
    held->push_back({limit, reason, retry_in});
  };
  std::map<std::string, int> free;
  for (const auto& slot : request.slots) free[slot.queue] += slot.free;

  // Higher priority first, then oldest, as the real claim orders its candidates.
  std::vector<FakeRow*> candidates;
  for (auto& [id, row] : table_->rows_) {
    if (row.status == FakeStatus::kPending && !row.deleted && row.run_at <= now &&
        (only == nullptr || std::find(only->begin(), only->end(), id) != only->end())) {
      candidates.push_back(&row);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const FakeRow* a, const FakeRow* b) {
    return a->job.priority > b->job.priority;
  });
  std::vector<Job> claimed;
  for (FakeRow* row : candidates) {
    if (static_cast<int>(claimed.size()) >= request.limit) break;
    if (!table_->claim_ignores_filters_) {
      if (!contains(request.types, row->job.type)) continue;
      if (contains(table_->paused_queues_, row->job.queue)) continue;
      const auto slot = free.find(row->job.queue);
      if (slot == free.end() || slot->second <= 0) continue;
      if (held != nullptr) {
        const auto limit = limit_of_type.find(row->job.type);
        if (limit != limit_of_type.end()) {
          const LimitDefinition& definition = *limit->second;
          const auto rate = table_->rate_holds_.find(definition.name);
          if (rate != table_->rate_holds_.end()) {
            hold(definition.name, "rate", rate->second);
            continue;
          }
          if (definition.limit.concurrency > 0 &&
              running[definition.name] >= definition.limit.concurrency) {
            hold(definition.name, "concurrency", std::nullopt);
            continue;
          }
          ++running[definition.name];
        }
      }
      --slot->second;
    }
    row->status = FakeStatus::kRunning;
    row->locked_by = request.worker_id;
    ++row->job.attempt;
    ++row->times_claimed;
    row->claimed_at = now;
    claimed.push_back(row->job);
    // As the real claim: a payload over the limit is not read.
    const auto bytes = static_cast<std::int64_t>(row->job.payload.size());
    if (bytes > request.max_payload_bytes) {
      claimed.back().payload.clear();
      claimed.back().oversized_payload_bytes = bytes;
    }
  }
  table_->changed();
  return claimed;
}

DueTimes FakeJobStore::next_due(const std::vector<std::string>& queues,
                                const std::vector<std::string>& types,
                                std::chrono::microseconds look_back) {
  auto lock = table_->enter(StoreMethod::kNextDue, role_);
  const auto now = FakeJobTable::Clock::now();
  return due_locked(queues, types, now, now - std::max(look_back, std::chrono::microseconds(0)));
}

DueTimes FakeJobStore::due_locked(const std::vector<std::string>& queues,
                                  const std::vector<std::string>& types,
                                  FakeJobTable::Clock::time_point now,
                                  FakeJobTable::Clock::time_point since) const {
  std::optional<FakeJobTable::Clock::time_point> earliest;
  std::optional<FakeJobTable::Clock::time_point> last_due;
  for (const auto& [id, row] : table_->rows_) {
    if (row.status != FakeStatus::kPending || row.deleted) continue;
    if (!contains(queues, row.job.queue) || !contains(types, row.job.type)) continue;
    if (contains(table_->paused_queues_, row.job.queue)) continue;
    if (row.run_at > now) {
      earliest = std::min(earliest.value_or(row.run_at), row.run_at);
    } else if (row.run_at > since) {
      last_due = std::max(last_due.value_or(row.run_at), row.run_at);
    }
  }
  DueTimes due;
  if (earliest) due.next_in = std::chrono::ceil<std::chrono::microseconds>(*earliest - now);
  if (last_due) due.last_due_ago = std::chrono::floor<std::chrono::microseconds>(now - *last_due);
  return due;
}

CompletionReport FakeJobStore::complete(const std::vector<Completion>& batch,
                                        const std::string& worker_id, bool delete_done) {
  auto lock = table_->enter(StoreMethod::kComplete, role_);
  for (const Completion& completion : batch) {
    if (table_->poisoned_.count(completion.job.id) != 0) {
      throw DbError("fake complete: interval field value out of range for job " +
                        std::to_string(completion.job.id),
                    "22008", false);
    }
  }
  CompletionReport report = std::exchange(table_->completion_news_, {});
  for (const Completion& completion : batch) {
    FakeRow* row = table_->find(completion.job.id);
    if (row == nullptr || !table_->owned(*row, completion.job, worker_id)) {
      ++report.stale;
      continue;
    }
    if (table_->row_held_.count(completion.job.id) != 0 ||
        table_->row_held_once_.erase(completion.job.id) != 0) {
      report.held.push_back(completion.job);
      continue;
    }
    ++report.written;
    row->locked_by.clear();
    row->last_error = completion.error;
    // As the completion statement: a cancel request wins over every outcome but done.
    const Outcome outcome = row->cancel_requested && completion.outcome != Outcome::kDone
                                ? Outcome::kCancelled
                                : completion.outcome;
    switch (outcome) {
      case Outcome::kDone:
        row->status = FakeStatus::kDone;
        row->deleted = delete_done;
        break;
      case Outcome::kRetry:
        row->status = FakeStatus::kFailed;
        row->retry_delay = completion.retry_delay;
        break;
      case Outcome::kDead:
        row->status = FakeStatus::kDead;
        break;
      case Outcome::kReleased:
        // Back to pending without counting the attempt, as the real release does.
        row->status = FakeStatus::kPending;
        --row->job.attempt;
        break;
      case Outcome::kCancelled:
        row->status = FakeStatus::kCancelled;
        break;
    }
  }
  if (report.held.empty()) {
    table_->completed_.push_back({batch, worker_id, delete_done});
  } else {  // held rows were not written
    CompleteCall call{{}, worker_id, delete_done};
    for (const Completion& completion : batch) {
      if (std::find(report.held.begin(), report.held.end(), completion.job) == report.held.end()) {
        call.batch.push_back(completion);
      }
    }
    if (!call.batch.empty()) table_->completed_.push_back(std::move(call));
  }
  table_->changed();
  return report;
}

bool FakeJobStore::run_and_complete(const std::string& /*sql*/, const Job& job,
                                    const std::string& worker_id, bool delete_done,
                                    Millis /*timeout*/, std::size_t /*max_result_bytes*/,
                                    std::stop_token /*stop*/) {
  auto lock = table_->enter(StoreMethod::kRunAndComplete, role_);
  FakeRow* row = table_->find(job.id);
  if (row == nullptr || !table_->owned(*row, {job.id, job.attempt}, worker_id)) return false;
  row->status = FakeStatus::kDone;
  row->deleted = delete_done;
  row->locked_by.clear();
  table_->changed();
  return true;
}

HeartbeatReport FakeJobStore::heartbeat(const std::vector<JobAttempt>& jobs,
                                        const std::string& worker_id, Millis /*lease*/) {
  auto lock = table_->enter(StoreMethod::kHeartbeat, role_);
  std::vector<JobAttempt> asked = jobs;
  std::sort(asked.begin(), asked.end());
  table_->heartbeats_.push_back(asked);
  HeartbeatReport report;
  for (const JobAttempt& job : jobs) {
    const FakeRow* row = table_->find(job.id);
    if (row == nullptr || !table_->owned(*row, job, worker_id)) continue;
    (table_->row_held_.count(job.id) != 0 ? report.held : report.kept).push_back(job);
    if (row->cancel_requested) report.cancel_requested.push_back(job);
  }
  table_->changed();
  return report;
}

RescueReport FakeJobStore::lead_and_rescue(const std::string& /*worker_id*/,
                                           Millis /*leadership_ttl*/, const RetryConfig& /*retry*/,
                                           int /*batch_size*/) {
  auto lock = table_->enter(StoreMethod::kLeadAndRescue, role_);
  return {table_->leader_, 0, 0, 0};
}

void FakeJobStore::resign(const std::string& worker_id) {
  auto lock = table_->enter(StoreMethod::kResign, role_);
  table_->resigned_.push_back(worker_id);
  table_->changed();
}

int FakeJobStore::prune(const RetentionConfig& /*retention*/, int batch_size) {
  auto lock = table_->enter(StoreMethod::kPrune, role_);
  const Millis per_slice = table_->prune_per_slice_;
  if (per_slice > Millis(0)) {
    lock.unlock();  // the other stores' calls go on meanwhile, as on a database
    std::this_thread::sleep_for(per_slice);
    lock.lock();
  }
  const int deleted = std::min(batch_size, table_->prune_backlog_);
  table_->prune_backlog_ -= deleted;
  table_->changed();
  return deleted;
}

std::vector<QueueStatsRow> FakeJobStore::queue_stats(const std::vector<std::string>& queues) {
  auto lock = table_->enter(StoreMethod::kQueueStats, role_);
  table_->stats_queues_.push_back(queues);
  if (table_->stats_override_) return *table_->stats_override_;
  std::map<std::pair<std::string, std::string>, double> counts;
  for (const auto& [id, row] : table_->rows_) {
    if (row.deleted || row.status == FakeStatus::kDone || row.status == FakeStatus::kDead) continue;
    if (!contains(queues, row.job.queue)) continue;
    counts[{row.job.queue, name_of(row.status)}] += 1;
  }
  std::vector<QueueStatsRow> rows;
  for (const auto& [key, n] : counts) rows.push_back({key.first, key.second, n, 0});
  return rows;
}

std::vector<std::string> FakeJobStore::paused_queues(const std::vector<std::string>& queues) {
  auto lock = table_->enter(StoreMethod::kPausedQueues, role_);
  std::vector<std::string> paused;
  for (const auto& queue : table_->paused_queues_) {
    if (contains(queues, queue)) paused.push_back(queue);
  }
  return paused;
}

LimitSync FakeJobStore::sync_limits(const std::map<std::string, LimitConfig>& limits,
                                    const std::string& writer) {
  auto lock = table_->enter(StoreMethod::kSyncLimits, role_);
  if (!table_->limits_busy_.empty()) return {{}, table_->limits_busy_};
  table_->limit_syncs_.push_back(limits);
  std::vector<LimitChange> changes;
  std::vector<LimitDefinition> next;
  for (const auto& [name, limit] : limits) {
    LimitDefinition definition{name, limit, writer};
    definition.limit.rate.clear();  // as load_limits returns it
    const auto old = std::find_if(table_->limits_.begin(), table_->limits_.end(),
                                  [&](const LimitDefinition& d) { return d.name == name; });
    if (old == table_->limits_.end()) {
      changes.push_back({name, "added", ""});
    } else if (!(old->limit == definition.limit)) {
      changes.push_back({name, "changed", old->written_by});
    } else {
      definition.written_by = old->written_by;
    }
    next.push_back(std::move(definition));
  }
  for (const LimitDefinition& old : table_->limits_) {
    if (limits.count(old.name) == 0) changes.push_back({old.name, "removed", old.written_by});
  }
  table_->limits_ = std::move(next);
  table_->changed();
  return {std::move(changes), ""};
}

std::vector<DeadLetterOverwrite> FakeJobStore::sync_dead_letters(
    const std::map<std::string, DeadLetterConfig>& dead_letters,
    const std::vector<std::string>& /*served*/, const std::string& /*writer*/) {
  auto lock = table_->enter(StoreMethod::kSyncDeadLetters, role_);
  table_->dead_letter_syncs_.push_back(dead_letters);
  table_->changed();
  return {};
}

std::vector<LimitDefinition> FakeJobStore::load_limits() {
  auto lock = table_->enter(StoreMethod::kLoadLimits, role_);
  return table_->limits_;
}

std::vector<LimitUsage> FakeJobStore::limit_usage() {
  auto lock = table_->enter(StoreMethod::kLimitUsage, role_);
  std::vector<LimitUsage> usage;
  for (const LimitDefinition& limit : table_->limits_) {
    LimitUsage use{limit.name, 0, 0};
    for (const auto& [id, row] : table_->rows_) {
      if (row.status == FakeStatus::kRunning && contains(limit.limit.types, row.job.type)) {
        ++use.running;
      }
    }
    use.partitions = use.running > 0 ? 1 : 0;
    usage.push_back(use);
  }
  return usage;
}

int FakeJobStore::collect_limit_garbage(Millis /*idle*/, int /*batch_size*/) {
  auto lock = table_->enter(StoreMethod::kLimitGarbage, role_);
  return 0;
}

int FakeJobStore::repair_dependencies(int /*batch_size*/) {
  auto lock = table_->enter(StoreMethod::kRepairDependencies, role_);
  return 0;
}

std::map<std::string, FakeDaemonRow> FakeJobTable::daemons() const {
  std::lock_guard lock(mutex_);
  return daemons_;
}

void FakeJobTable::add_daemon(const DaemonReport& report, Millis seen_ago) {
  std::lock_guard lock(mutex_);
  FakeDaemonRow& row = daemons_[report.id];
  row.report = report;
  row.seen_at = Clock::now() - seen_ago;
  changed();
}

void FakeJobStore::report_daemon(const DaemonReport& report) {
  auto lock = table_->enter(StoreMethod::kReportDaemon, role_);
  FakeDaemonRow& row = table_->daemons_[report.id];
  row.report = report;
  row.seen_at = FakeJobTable::Clock::now();
  ++row.reports;
  table_->changed();
}

void FakeJobStore::remove_daemon(const std::string& worker_id) {
  auto lock = table_->enter(StoreMethod::kRemoveDaemon, role_);
  table_->daemons_.erase(worker_id);
  table_->changed();
}

int FakeJobStore::expire_daemons() {
  auto lock = table_->enter(StoreMethod::kExpireDaemons, role_);
  const auto now = FakeJobTable::Clock::now();
  const auto erased = std::erase_if(table_->daemons_, [&](const auto& entry) {
    return entry.second.seen_at + entry.second.report.ttl < now;
  });
  if (erased > 0) table_->changed();
  return static_cast<int>(erased);
}

void FakeJobStore::announce_finished(const std::vector<std::string>& payloads) {
  auto lock = table_->enter(StoreMethod::kAnnounceFinished, role_);
  table_->announced_.push_back(payloads);
  table_->changed();
}

std::string FakeJobStore::schema_problem() {
  auto lock = table_->enter(StoreMethod::kSchemaProblem, role_);
  return table_->schema_problem_;
}

// ---- FakeDatabase ---------------------------------------------------------------------

// A LISTEN session: an eventfd that FakeDatabase::notify() counts up.
class FakeNotifications final : public Notifications {
 public:
  explicit FakeNotifications(std::shared_ptr<FakeJobTable> table)
      : table_(std::move(table)), fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
    std::lock_guard lock(table_->mutex_);
    table_->sessions_[fd_];
    ++table_->listen_opened_;
    table_->changed();
  }
  ~FakeNotifications() override {
    {
      std::lock_guard lock(table_->mutex_);
      table_->sessions_.erase(fd_);
      ++table_->listen_closed_;
      table_->changed();
    }
    close(fd_);
  }
  FakeNotifications(const FakeNotifications&) = delete;
  FakeNotifications& operator=(const FakeNotifications&) = delete;

  int socket() const override { return fd_; }
  void consume(const std::function<void(NotifyChannel, int)>& on_notify) override {
    std::uint64_t count = 0;
    if (read(fd_, &count, sizeof count) != static_cast<ssize_t>(sizeof count)) return;
    std::deque<NotifyChannel> sent;
    {
      std::lock_guard lock(table_->mutex_);
      sent.swap(table_->sessions_[fd_]);
    }
    for (const NotifyChannel channel : sent) on_notify(channel, 0);
    std::lock_guard lock(table_->mutex_);
    table_->delivered_ += static_cast<int>(sent.size());
    table_->changed();
  }

 private:
  const std::shared_ptr<FakeJobTable> table_;
  const int fd_;
};

std::unique_ptr<JobStore> FakeDatabase::open_store(const std::string& role, StoreUse use) {
  {
    std::lock_guard lock(table_->mutex_);
    table_->opened_roles_.push_back(role);
    table_->opened_uses_[role] = use;
    table_->changed();
  }
  return std::make_unique<FakeJobStore>(table_, role);
}

std::unique_ptr<Notifications> FakeDatabase::listen() {
  return std::make_unique<FakeNotifications>(table_);
}

std::unique_ptr<ScheduleStore> FakeDatabase::open_schedule_store(const std::string& /*role*/) {
  return std::make_unique<FakeScheduleStore>(schedules_);
}

SchemaReport FakeDatabase::prepare_schema(bool /*migrate*/,
                                          const std::function<bool()>& /*stop_requested*/) {
  return {1, 1, "", false};
}

void FakeDatabase::notify(NotifyChannel channel) {
  std::lock_guard lock(table_->mutex_);
  const std::uint64_t one = 1;
  for (auto& [fd, sent] : table_->sessions_) {
    sent.push_back(channel);
    [[maybe_unused]] const auto n = write(fd, &one, sizeof one);
  }
}

}  // namespace pgjobd::testing
