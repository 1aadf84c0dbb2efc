// Fetcher: the claim loop and its adaptive poll interval.

#include "engine/fetcher.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <random>

#include "engine/loop_error.hpp"
#include "store/reconnect_backoff.hpp"

namespace pgjobd {

using Clock = std::chrono::steady_clock;

namespace {
// ±10%: daemons that started together do not poll in lockstep.
Clock::duration jittered(Millis interval) {
  thread_local std::mt19937 generator{std::random_device{}()};
  std::uniform_real_distribution<double> factor(0.9, 1.1);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(
      static_cast<double>(interval.count()) * factor(generator)));
}
}  // namespace

Fetcher::Fetcher(Options options, std::unique_ptr<ClaimStore> store, WorkerPool& pool,
                 ClaimSignal& signal, Metrics& metrics, Health& health)
    : worker_id_(std::move(options.worker_id)),
      lease_(options.lease),
      progress_slice_(options.progress_slice),
      trailing_claim_delay_(options.trailing_claim),
      slow_claim_(options.slow_claim),
      store_(std::move(store)),
      pool_(pool),
      signal_(signal),
      metrics_(metrics),
      health_(health),
      limits_(options.limits),
      min_interval_(options.poll.min_interval),
      max_interval_(options.poll.max_interval),
      types_(std::move(options.types)),
      max_payload_bytes_(options.max_payload_bytes),
      interval_(options.poll.min_interval) {}

Fetcher::~Fetcher() { stop(); }

void Fetcher::start() {
  thread_.start([this](const std::stop_token& stop) { run(stop); });
}
void Fetcher::request_stop() { thread_.request_stop(); }
void Fetcher::join() { thread_.join(); }

void Fetcher::reconfigure(const PollConfig& poll, std::vector<std::string> types) {
  {
    std::lock_guard lock(settings_mutex_);
    min_interval_ = poll.min_interval;
    max_interval_ = poll.max_interval;
    interval_ = std::clamp(interval_, min_interval_, max_interval_);
    types_ = std::move(types);
  }
  signal_.wake();  // new types may have waiting jobs
}

void Fetcher::set_max_payload_bytes(std::int64_t bytes) {
  std::lock_guard lock(settings_mutex_);
  max_payload_bytes_ = bytes;
}

int Fetcher::claim_batch_floor() const { return std::max(1, pool_.holdable(prefetch()) / 2); }

bool Fetcher::held_run_short() const {
  return pool_.held() < pool_.holdable(prefetch()) / kHeldShortShare;
}

bool Fetcher::prefetch() const { return limits_ == nullptr || limits_->prefetch_allowed(); }

void Fetcher::cap_holding() {
  int cap = 0;
  if (limits_ != nullptr && limits_->active()) {
    std::vector<std::string> types;
    {
      std::lock_guard lock(settings_mutex_);
      types = types_;
    }
    cap = limits_->covering_concurrency(pool_.queues(), types);
  }
  pool_.set_hold_cap(cap);
}

Millis Fetcher::max_interval() const {
  std::lock_guard lock(settings_mutex_);
  return max_interval_;
}

void Fetcher::mark_progress() {
  last_progress_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

bool Fetcher::wait_until_claim(const std::stop_token& stop) {
  cap_holding();
  std::unique_lock lock(signal_.mutex);
  const auto saturated_queue_has_room = [&] {
    if (saturated_.empty()) return false;
    for (const QueueSlots& slot : pool_.free_slots(prefetch())) {
      if (saturated_.count(slot.queue) > 0) return true;
    }
    return false;
  };
  // The next poll, or sooner the next job known to become due or the claim that follows
  // a NOTIFY's.
  // A NOTIFY (and nothing else) heard while NOTIFYs are spaced out (kNotifyGapMax): its
  // claim waits for notify_ready_at_.
  const auto notify_spaced = [&] {
    return signal_.woken && signal_.for_insert && !signal_.woken_not_for_insert &&
           Clock::now() < notify_ready_at_;
  };
  const auto next_claim = [&] {
    return std::min({next_poll_, next_due_, hinted_due_, trailing_claim_,
                     notify_spaced() ? notify_ready_at_ : Clock::time_point::max()});
  };
  const auto limit_slot_freed = [&] { return limit_held_ && signal_.written != written_at_claim_; };
  const auto due = [&] {
    return (signal_.woken && !notify_spaced()) || backlog_ || Clock::now() >= next_claim() ||
           saturated_queue_has_room() || limit_slot_freed() || !signal_.unblocked.empty() ||
           !unblocked_.empty();  // taken by a claim that found no slot to offer
  };
  // A claim costs a round trip and a transaction whatever its size, so while most slots
  // are busy it waits, up to kClaimCooldown after the last claim, for half of them to be
  // free; an idle pool claims at once. Claiming for each freed slot made batches of 1-10
  // jobs that held the claim connection while hundreds of slots freed behind it. At the
  // cooldown it claims only if the jobs held for a thread run short (held_run_short):
  // while many still wait, the workers have more to do than a claim takes, and it waits on
  // for the floor, looking again each kClaimCooldown.
  const auto enough_free = [&](int free) {
    if (free <= 0) return false;
    if (free >= claim_batch_floor()) return true;
    const auto now = Clock::now();
    if (now < cooled_down_at_) return false;
    if (held_run_short()) return true;
    cooled_down_at_ = now + kClaimCooldown;
    return false;
  };
  signal_.wants_written = limit_held_;  // what limit_slot_freed() waits for
  while (!stop.stop_requested()) {
    hinted_due_ = std::min(hinted_due_, signal_.due_hint);
    signal_.due_hint = Clock::time_point::max();
    const int free = pool_.claimable(prefetch());
    if (due() && enough_free(free)) {
      woken_ = signal_.woken;
      for_insert_ = signal_.for_insert;
      unblocked_.insert(unblocked_.end(), signal_.unblocked.begin(), signal_.unblocked.end());
      signal_.unblocked.clear();
      signal_.woken = false;
      signal_.for_insert = false;
      signal_.woken_not_for_insert = false;
      written_at_claim_ = signal_.written;
      pool_.arm_slot_wake(0, prefetch());  // the jobs finishing during the claim: no wake-up
      return true;
    }
    // The freed slots that would change the answer: with none free, the first one; with a
    // claim due but too few free, enough for a batch; otherwise none (what is awaited then
    // is a time or an event). A queue with its own limit wakes us on each of its jobs.
    const int wanted = free <= 0 ? 1 : due() ? claim_batch_floor() : 0;
    if (pool_.arm_slot_wake(wanted, prefetch())) continue;  // freed meanwhile: look again
    // Pool full: a finishing job wakes us. The wait is cut into slices so that a loop
    // waiting for slots busy with long jobs still shows progress to the watchdog.
    auto until = Clock::now() + progress_slice_;
    if (free > 0) until = std::min(until, due() ? cooled_down_at_ : next_claim());
    // Ends early on a wake-up, a freed slot or a stop request.
    const std::uint64_t seen = signal_.events;
    signal_.cv.wait_until(lock, stop, until, [&] { return signal_.events != seen; });
    mark_progress();
  }
  return false;
}

bool Fetcher::wait_first_claim(std::chrono::steady_clock::time_point deadline) const {
  return first_claim_made_.wait_until(deadline) == std::future_status::ready;
}

void Fetcher::run(const std::stop_token& stop) {
  // Told once: after the first claim, whatever its outcome, or when the loop ends first.
  bool told = false;
  const auto tell_first_claim = [&] {
    if (!told) first_claim_.set_value();
    told = true;
  };
  const struct TellOnExit {
    decltype(tell_first_claim)& tell;
    ~TellOnExit() { tell(); }
  } tell_on_exit{tell_first_claim};
  ReconnectBackoff backoff;
  while (true) {
    mark_progress();
    if (!wait_until_claim(stop)) return;
    bool full = false;
    try {
      const auto watch = health_.watch_call("fetcher");
      full = claim_once(woken_);
      tell_first_claim();
      // The end of an outage (a restart, a failover) is as much news as its start.
      if (backoff.failures() > 0) {
        spdlog::info("claims work again after {} failed attempt(s)", backoff.failures());
      }
      backoff.reset();
      health_.clear("fetcher");
    } catch (const std::exception& e) {  // a DbError, or a bug: the pass is lost, not the loop
      tell_first_claim();
      count_loop_error(&metrics_, "claim", "claim", e);
      health_.set_problem("fetcher", e.what());
      const auto wait = backoff.next();
      spdlog::warn("claim failed, retrying in {}ms: {}", wait.count(), e.what());
      backlog_ = false;
      saturated_.clear();  // nothing is due before the backoff ends
      // Nor is an awaited job: one already due would make the next claim at once, round
      // and round through the outage. The first claim after it asks the store again.
      next_due_ = Clock::time_point::max();
      hinted_due_ = Clock::time_point::max();
      next_due_stale_ = true;
      trailing_claim_ = Clock::time_point::max();  // the claim after the outage covers it
      next_poll_ = Clock::now() + wait;
      continue;
    }
    backlog_ = full;
    cooled_down_at_ = Clock::now() + kClaimCooldown;
    Millis interval;
    {
      std::lock_guard lock(settings_mutex_);
      interval = interval_;
    }
    metrics_.set_poll_interval(std::chrono::duration<double>(interval).count());
    if (!full) next_poll_ = Clock::now() + jittered(interval);
  }
}

bool Fetcher::claim_once(bool woken) {
  // A wake-up may mean new jobs, due earlier than the one awaited: ask again after this
  // claim (or the next one that is made, if there is no slot to claim for now).
  if (woken) next_due_stale_ = true;
  // Any claim made once the trailing claim is due serves as it (Options::trailing_claim).
  const bool trailing = Clock::now() >= trailing_claim_;
  if (trailing) trailing_claim_ = Clock::time_point::max();
  if (limits_ != nullptr && !limits_read_) {
    // One round trip on this session, before the first claim's budget: with no limit
    // defined (the usual case) the first claim already prefetches and takes the plain
    // claim. A failure leaves the limited claim to run until the maintenance loop's sync.
    limits_read_ = true;
    try {
      limits_->read_before_first_claim(*store_);
    } catch (const DbError& e) {
      spdlog::debug("reading the limits before the first claim failed: {}", e.what());
    }
  }
  ClaimRequest request;
  auto budget = pool_.claim_budget(prefetch());
  request.slots = std::move(budget.slots);
  request.limit = budget.limit;
  request.startable = std::min(request.limit, pool_.claimable(false));
  // Read before the claim: only this thread adds jobs to the pool, so it can only be high.
  request.own_running = pool_.busy();
  if (request.slots.empty() || request.limit <= 0) return false;
  request.worker_id = worker_id_;
  request.lease = lease_;
  {
    std::lock_guard lock(settings_mutex_);
    request.types = types_;
    request.max_payload_bytes = max_payload_bytes_;
  }
  // Children this daemon's completions unblocked are claimed by id when nothing else is
  // known to wait: no wake-up (a NOTIFY from another session), no backlog, no queue that
  // took every slot it was offered. Else the claim in claim order takes them with the rest
  // (a child claimed by id would pass older or higher-priority jobs of its queue).
  std::vector<std::int64_t> unblocked;
  unblocked.swap(unblocked_);
  const bool by_id = !unblocked.empty() && !woken && !trailing && !backlog_ && saturated_.empty() &&
                     claimed_before_ && static_cast<int>(unblocked.size()) <= request.limit &&
                     (limits_ == nullptr || !limits_->active());
  claim_began_ = Clock::now();
  std::vector<Job> jobs;
  try {
    jobs = by_id ? store_->claim_ids(request, unblocked) : claim_jobs(request);
  } catch (const LimitsExist&) {
    // A limit came after the last read of them. Nothing was claimed: read them on this
    // session and claim again at once, with the request they now allow (prefetch).
    if (limits_ == nullptr) throw;
    limits_->found_by_claim(*store_);
    hinted_due_ = Clock::now();
    return false;
  }
  // One not taken may be due later (its own run_at), which only the question tells.
  if (by_id && jobs.size() < unblocked.size()) next_due_stale_ = true;
  // A trailing claim that took up a NOTIFY while they are spaced out is not followed by
  // another: in a flood, each would be (a claim every trailing_claim, whatever the gap).
  if (for_insert_ && !(trailing && notify_gap_ > Clock::duration::zero())) {
    trailing_claim_ = claim_began_ + trailing_claim_delay_;
  }
  if (!jobs.empty()) {
    notify_gap_ = {};
  } else if (for_insert_) {
    notify_gap_ = std::clamp<Clock::duration>(notify_gap_ * 2, kNotifyGapMin, kNotifyGapMax);
    notify_ready_at_ = claim_began_ + notify_gap_;
  }
  note_claim_time(Clock::now() - claim_began_, jobs.size());
  metrics_.fetch_batch(static_cast<int>(jobs.size()));
  const bool full = static_cast<int>(jobs.size()) == request.limit;
  // A queue that got every slot it was offered likely has more waiting: its next freed
  // slot makes a claim due (see wait_until_claim), even when the batch as a whole was
  // not full because other queues had nothing.
  std::map<std::string, int> claimed;
  for (const Job& job : jobs) ++claimed[job.queue];
  for (const QueueSlots& slot : request.slots) {
    if (claimed[slot.queue] >= slot.free) {
      saturated_.insert(slot.queue);
    } else {
      saturated_.erase(slot.queue);
    }
  }
  {
    std::lock_guard lock(settings_mutex_);
    // A NOTIFY is followed by a poll at the minimum interval even when its claim found
    // nothing: the INSERT trigger sends at most one per 2 ms (sql/010_notify_debounce), and
    // a job whose INSERT went without one, relying on this NOTIFY, may commit just after
    // the claim it set off (another daemon may also have taken that claim's jobs). The
    // trailing claim that may come first is part of the same wake-up.
    const bool quiet = jobs.empty() && !woken && !trailing;
    interval_ = quiet ? std::min(interval_ * 2, max_interval_) : min_interval_;
  }
  // The claim's order (RETURNING does not keep it): higher priority first, then the longest
  // due (the earliest run_at: every wait of one claim is measured from the same now()),
  // then id. With prefetch a claim holds many jobs that wait for a thread in this order.
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.queue_wait_seconds != b.queue_wait_seconds) {
      return a.queue_wait_seconds > b.queue_wait_seconds;
    }
    return a.id < b.id;
  });
  for (const Job& job : jobs) {
    spdlog::debug("claimed job {} ({}) attempt {}", job.id, job.type, job.attempt);
  }
  pool_.submit(std::move(jobs));
  metrics_.set_workers_busy(pool_.working());
  metrics_.set_jobs_held(pool_.held());
  // The handlers are started first: asking for the next due job does not delay them.
  if (full) {
    next_due_stale_ = true;  // a backlog hides later jobs: ask once it is worked off
  } else {
    learn_next_due(request);
  }
  return full;
}

void Fetcher::note_claim_time(Clock::duration took, std::size_t jobs) {
  const double seconds = std::chrono::duration<double>(took).count();
  metrics_.claim_duration(seconds);
  if (took < slow_claim_) return;
  ++slow_claims_;
  const auto now = Clock::now();
  if (slow_warned_at_ != Clock::time_point{} && now - slow_warned_at_ < kSlowClaimWarnEvery) {
    return;
  }
  // Each claim is a few milliseconds normally; a claim of a second holds up every job due
  // meanwhile. (The stall in bench/README.md's hour of churn was slow claims or a fetcher
  // that waited: this and the histogram tell which.)
  spdlog::warn(
      "slow claim: {:.2f} s for {} job(s) ({} claim(s) of {:g} s or more since the last such "
      "warning); due jobs wait meanwhile. pgjobd_claim_duration_seconds has every claim's "
      "time; the server's log shows why (log_min_duration_statement, auto_explain)",
      seconds, jobs, slow_claims_, std::chrono::duration<double>(slow_claim_).count());
  slow_claims_ = 0;
  slow_warned_at_ = now;
}

std::vector<Job> Fetcher::claim_jobs(const ClaimRequest& request) {
  limit_held_ = false;
  claim_due_.reset();
  const bool first = !claimed_before_;
  claimed_before_ = true;
  if (limits_ == nullptr || !limits_->active()) {
    if (first) {
      // A new session parses and plans this plain claim in 5-6 ms, the one that also says
      // when the next job is due in 10-11 (and the claim's transaction starts 1.5 ms
      // sooner): the jobs of a daemon's first claim get to the workers about 6 ms sooner
      // (bench/README, "Start-up, sixth round"). A short first claim is followed by the
      // question (learn_next_due), as behind a transaction pooler.
      return store_->claim(request);
    }
    // Every served queue, not only those with a free slot now (see learn_next_due).
    claim_due_queues_ = pool_.queues();
    ClaimWithDue claim = store_->claim_with_due(request, claim_due_queues_);
    claim_answered_ = Clock::now();
    claim_due_ = claim.due;
    return std::move(claim.jobs);
  }
  std::vector<std::string> queues;
  for (const QueueSlots& slot : request.slots) queues.push_back(slot.queue);
  ClaimRequest limited = request;
  limited.one_concurrency_limit = limits_->one_concurrency_limit(queues, request.types);
  LimitedClaim claim = store_->claim_limited(limited);
  if (!claim.held.empty()) limits_->count_hold();
  const auto now = Clock::now();
  for (const LimitHold& hold : claim.held) {
    metrics_.limit_throttled(hold.limit, hold.reason);
    if (hold.retry_in) {
      // A rate limit's next token: claim again then, not in a loop before it.
      hinted_due_ = std::min(hinted_due_, now + *hold.retry_in);
    } else if (hold.reason == "concurrency") {
      limit_held_ = true;
    }
    spdlog::debug("limit {} held back due jobs ({})", hold.limit, hold.reason);
  }
  return std::move(claim.jobs);
}

void Fetcher::learn_next_due(const ClaimRequest& request) {
  const auto now = Clock::now();
  // An awaited time that has come was for this claim: the store knows what comes next.
  const bool reached = now >= std::min(next_due_, hinted_due_);
  if (hinted_due_ <= now) hinted_due_ = Clock::time_point::max();
  if (claim_due_) {
    // The claim answered in its own round trip, from its own snapshot: always fresh.
    note_next_due(*claim_due_, claim_answered_, std::move(claim_due_queues_));
    return;
  }
  // Every served queue, not only those with a free slot now: on a busy daemon with
  // per-queue limits that set changes from claim to claim, and each change would cost a
  // question. A job due in a queue that is full then is woken for once, claims nothing,
  // and the question that follows looks past it.
  std::vector<std::string> queues = pool_.queues();
  if (!next_due_stale_ && !reached && queues == next_due_queues_) return;
  // Stays stale if the query fails: the next claim asks again.
  next_due_stale_ = true;
  const DueTimes due = store_->next_due(
      queues, request.types,
      std::chrono::ceil<std::chrono::microseconds>(Clock::now() - claim_began_) + kDueLookBack);
  note_next_due(due, Clock::now(), std::move(queues));
}

void Fetcher::note_next_due(const DueTimes& due, Clock::time_point answered,
                            std::vector<std::string> queues) {
  // A due job the claim skipped is stuck (locked by another session, or no slot: waking
  // for it would spin), but one may have come due after the claim looked, while the claim
  // and this question were on their way; waiting for the next job not due yet left it to
  // the next poll (DelayedE2E: a retry due 1 ms after another's claim waited 4.5 s). The
  // time from the claim's start to this answer holds the time between the two statements'
  // reading of the clock: a job that came due less long ago may have come due after the
  // claim looked, and is claimed at once. At worst that is one claim for a stuck job due
  // just before the claim looked; the next question, asked after that claim, looks past it.
  // (A claim's own answer has no such job: one snapshot, one clock.)
  if (due.last_due_ago && *due.last_due_ago < answered - claim_began_) {
    next_due_ = answered;
    spdlog::debug("a job came due {}us ago, maybe after the claim looked: claiming again",
                  due.last_due_ago->count());
  } else {
    next_due_ = due.next_in ? answered + *due.next_in : Clock::time_point::max();
    if (due.next_in) spdlog::debug("next job due in {}us", due.next_in->count());
  }
  next_due_queues_ = std::move(queues);
  next_due_stale_ = false;
}

}  // namespace pgjobd
