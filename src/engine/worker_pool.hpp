#pragma once
// A fixed set of worker threads bounded by slots: one global count (worker.concurrency)
// and one per queue (worker.queues.NAME.concurrency). The fetcher asks for free slots,
// claims at most that many jobs, and submits each. Beyond its threads the pool may hold a
// few claimed jobs waiting for one (worker.prefetch, bounded by PrefetchBudget), highest
// priority first; without prefetch a submitted job always has a thread waiting for it.
// Held jobs are in hand like running ones: heartbeats renew their leases, a cancel or a
// lost lease stops them before they start, and drain hands them back (release_queued).
// Its threads follow the Service contract: start() launches them; stop() lets the jobs in
// hand finish and joins them.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "engine/job_finish.hpp"
#include "engine/job_stop.hpp"
#include "engine/prefetch_budget.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/job.hpp"
#include "runtime/service.hpp"
#include "store/job_attempt.hpp"
#include "store/job_store.hpp"

namespace pgjobd {

class WorkerPool final : public Service {
 public:
  // Runs one job to the end (handler, metrics, completion). Must not throw.
  // Returns the completion to write (nothing when the handler wrote its own). `stop` is
  // requested when the pool stops the job, with the reason (JobStop::cause).
  using Executor = std::function<std::optional<Completion>(const Job& job, const JobStop& stop)>;
  // Like Executor, but may hand the job over (JobRunner::start): its thread is then free
  // for the next job while the job stays in hand (slots, heartbeats, stops) until `finish`.
  using StartJob =
      std::function<JobStarted(const Job& job, const JobStop& stop, const JobFinish& finish)>;
  // Whether StartJob will hand this job over. Such a job is started by the thread that
  // submits it (the fetcher's), or that ends a handed-over job and frees the slot it waited
  // for (waking a worker for it cost a thread switch per job); a job that holds its thread
  // waits for a worker.
  using HandsOff = std::function<bool(const Job& job)>;
  // Receives each completion after its job is marked finished (the completer's submit).
  using Complete = std::function<void(Completion)>;
  // Called after a job left the pool (its slot is free again), with the jobs then on a
  // thread (working()), when the fetcher waits for it (arm_slot_wake), when the job's queue
  // has its own limit, or when the pool became idle. `for_fetcher`: one of the first two,
  // which the fetcher must hear of; a pool falling idle alone only sets the busy gauge (in a
  // stream of short jobs nearly every job does, and waking the fetcher each time for
  // nothing cost a context switch per job).
  using SlotFreed = std::function<void(int working_now, bool for_fetcher)>;

  // Makes one worker thread running `body` (a unit test's own can hold one up).
  using StartThread = std::function<std::thread(std::function<void()> body)>;

  // `now`: the prefetch budget's clock (a unit test's own). `start_thread`: empty for
  // std::thread.
  WorkerPool(const WorkerConfig& config, StartJob start_job, HandsOff hands_off, Complete complete,
             SlotFreed slot_freed, PrefetchBudget::Now now = &std::chrono::steady_clock::now,
             StartThread start_thread = {});
  WorkerPool(const WorkerConfig& config, Executor executor, Complete complete, SlotFreed slot_freed,
             PrefetchBudget::Now now = &std::chrono::steady_clock::now,
             StartThread start_thread = {});
  ~WorkerPool() override;  // stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void start() override;         // launches worker.concurrency threads
  void request_stop() override;  // idle threads exit; busy ones once their job returns
  void join() override;          // also waits for the jobs handed over to end

  // Free slots per served queue (each already capped by the global free count). With
  // `prefetch`, the global count includes what PrefetchBudget allows beyond the threads;
  // the fetcher asks without it while limits apply (a held job would count against them).
  std::vector<QueueSlots> free_slots(bool prefetch = true) const;
  // The served queues (worker.queues), free slots or not, in name order.
  std::vector<std::string> queues() const;
  // How many jobs could start now: min(global free, sum of the queues' free slots).
  int claimable(bool prefetch = true) const;
  // The most jobs the pool would hold now: its threads plus the prefetch budget.
  int holdable(bool prefetch = true) const;
  // Both of the above, read together: what one claim may ask for. (Read apart, a job
  // finishing in between made the limit exceed the slots offered, and the claim that
  // returned fewer jobs than its limit looked like the end of the backlog.)
  struct ClaimBudget {
    std::vector<QueueSlots> slots;
    int limit = 0;
  };
  ClaimBudget claim_budget(bool prefetch = true) const;
  // Asks for SlotFreed once `free_wanted` jobs could be claimed (claimable, with or
  // without prefetch as given) rather than after every job: with prefetch a claim hands
  // over a thousand short jobs, and waking the fetcher for each of them (a futex wake and a
  // look at the pool, under this lock) cost more than the jobs. Counted in claimable jobs,
  // looked at as each job leaves: the prefetch budget grows as jobs finish, so it may be
  // what makes enough claimable. 0 asks for none but those the pool always makes (see
  // SlotFreed). Until the first call, every job leaving the pool calls it. Returns true,
  // arming nothing, when that many are claimable already: the caller looks again instead of
  // waiting for a wake-up that may not come.
  bool arm_slot_wake(int free_wanted, bool prefetch = true);
  // Hands claimed jobs to the workers, in order, under one lock; those handed over (HandsOff)
  // start on the calling thread. Precondition: each job's queue had a free slot.
  void submit(std::vector<Job> jobs);

  // Jobs in hand: running, handing over, or held waiting for a thread.
  int busy() const { return busy_.load(std::memory_order_relaxed); }
  // Of these, the ones a thread has taken (what the workers-busy gauge shows).
  int working() const {
    return busy_.load(std::memory_order_relaxed) - queued_.load(std::memory_order_relaxed);
  }
  // The jobs held for a thread (worker.prefetch), waiting.
  int held() const { return queued_.load(std::memory_order_relaxed); }
  // Takes the held jobs no thread has started out of the pool and returns them (drain:
  // their completions release them to the queue, the attempt not counted).
  std::vector<JobAttempt> release_queued();
  // Jobs submitted since the pool was made: unchanged between two looks means no new work.
  std::uint64_t submitted() const;
  int capacity() const;

  // Applies a new worker config live (SIGHUP): concurrency up or down and the per-queue
  // limits. Running jobs are never interrupted; after a shrink the pool claims nothing
  // until enough of them have finished.
  void resize(const WorkerConfig& config);
  // At most this many jobs in hand (0: no bound beyond the workers and prefetch): a limit
  // that covers every job the pool serves (LimitRegistry::covering_concurrency).
  void set_hold_cap(int cap);

  // The attempts in the pool (handlers running, or returned and still handing over).
  std::vector<JobAttempt> running() const;
  // Of these attempts, those whose handler is still running (the others have finished and
  // their completion may already be written, which a heartbeat then no longer sees as
  // ours).
  std::vector<JobAttempt> still_running(const std::vector<JobAttempt>& jobs) const;
  // Asks the handlers of these attempts (or all) to stop, for the daemon's sake.
  void stop_jobs(const std::vector<JobAttempt>& jobs);
  void stop_all_jobs();
  // Asks the handlers of these attempts to stop because pgjobd_cancel asked. Returns the
  // attempts whose handler was still running and not already asked to (each only once).
  std::vector<JobAttempt> cancel_jobs(const std::vector<JobAttempt>& jobs);
  // Records that a heartbeat sent at `sent_at` renewed these attempts' leases.
  void renewed(const std::vector<JobAttempt>& jobs, std::chrono::steady_clock::time_point sent_at);
  // Stops the jobs whose lease has run out by our own clock: `lease` after their last
  // renewal (renewed()), or after they were submitted when none came since. Each job
  // counts on its own: one whose row another session holds misses renewals the others
  // get. Returns the attempts stopped now (each only once).
  std::vector<JobAttempt> stop_expired(Millis lease);
  // Waits until no job runs or the deadline passes (or, if interruptible, until
  // interrupt_wait()); true when idle.
  bool wait_idle(std::chrono::steady_clock::time_point deadline, bool interruptible = true);
  // Ends wait_idle at once, now and for later calls (the second SIGTERM).
  void interrupt_wait();

 private:
  void worker_loop();
  std::vector<QueueSlots> free_slots_locked(bool prefetch) const;
  int holdable_locked(bool prefetch) const;
  int global_free_locked(bool prefetch) const;
  ClaimBudget claim_budget_locked(bool prefetch) const;
  // claim_budget_locked's limit without its list (nothing allocated: read as each job leaves).
  int claimable_locked(bool prefetch) const;

  // A queue the pool has seen, served now or not. Never erased (a job's Slot points at it).
  struct QueueState {
    bool served = false;  // in worker.queues now
    int limit = 0;        // its own concurrency; 0 = only the global bound
    int busy = 0;         // its jobs in hand
  };
  // One job in hand, from submit() to its worker's clean-up. Made before the lock is taken
  // and freed after it is let go: 64 threads share the lock, and on two cores a thread
  // preempted while holding it stalls the others, so under it a job costs a few pointer
  // moves (no allocation, no lookup by queue name or ticket). Known by its address, not by
  // job id: a released job can be claimed again (same id, same attempt) before the worker
  // that ran it has cleaned up.
  struct Slot {
    Slot(Job claimed, std::chrono::steady_clock::time_point submitted_at)
        : job(std::move(claimed)), submitted(submitted_at) {}
    JobAttempt attempt() const { return {job.id, job.attempt}; }
    Job job;
    JobStop stop;  // the handler reads it unlocked; it lives until the handler returned
    std::chrono::steady_clock::time_point submitted;
    std::chrono::steady_clock::time_point started;              // when a thread took it
    std::chrono::steady_clock::time_point renewed = submitted;  // the last renewal's send
    QueueState* queue = nullptr;
    bool lease_lost = false;
    bool cancelled = false;
    // Its completion is on its way to the database. Set by the worker without the lock
    // (one lock less per job), read under it.
    std::atomic<bool> handler_returned = false;
    // The in-hand list, in submission order.
    Slot* prev = nullptr;
    Slot* next = nullptr;
  };
  // Whether the job leaving with busy_now left calls SlotFreed, and with which for_fetcher
  // (see wake_wanted_).
  struct SlotWake {
    bool call = false;
    bool for_fetcher = false;
  };
  SlotWake slot_wake_locked(const QueueState& queue, int busy_now);
  // A handed-over job ended (its JobFinish), on the handler's thread.
  void finish_handed_off(Slot* slot, std::optional<Completion> completion);
  // Takes the first held job for the calling thread (pending_ not empty, a slot free).
  Slot* take_pending_locked();
  // Takes the first held job and starts it on this thread if it is handed over (a job that
  // ran in place, after a reload, leaves into `finished` and the next is tried): true when
  // one was handed over.
  bool start_next_here_locked(std::unique_lock<std::mutex>& lock,
                              std::vector<std::unique_ptr<Slot>>& finished);
  // Starts a job taken from pending_ on this thread; true when it was handed over, else it
  // ended here and its completion was handed on (the caller then makes it leave).
  bool start_taken(Slot* slot);
  // The job leaves its slot: counts, the prefetch budget, SlotFreed (called with the lock let
  // go). The caller unlinks it next.
  void leave_locked(const Slot& slot, std::chrono::steady_clock::time_point ended,
                    std::unique_lock<std::mutex>& lock);
  // Starts threads up to capacity_. Takes mutex_ for the counts only, never while a thread
  // is made: making 64 of them takes 20 ms or more, and the fetcher's first claim (which
  // asks the pool how many slots are free) would wait for the last.
  void grow();
  void link_locked(std::unique_ptr<Slot> slot);
  std::unique_ptr<Slot> unlink_locked(Slot* slot);
  template <typename Visit>
  void for_each_in_hand_locked(Visit visit) const {
    for (Slot* slot = in_hand_head_; slot != nullptr; slot = slot->next) visit(*slot);
  }

  // Guarded by mutex_, like everything below it.
  int capacity_ = 0;
  int hold_cap_ = 0;  // set_hold_cap
  int live_threads_ = 0;
  bool started_ = false;
  std::map<std::string, QueueState, std::less<>> queue_states_;
  StartJob start_job_;
  HandsOff hands_off_;
  Complete complete_;
  SlotFreed slot_freed_;
  const StartThread start_thread_;  // read without the lock: never changes

  // Held by grow() while it makes threads and by join(), so join() sees every thread made
  // (taken before mutex_, never while holding it).
  std::mutex grow_mutex_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable idle_;
  std::deque<Slot*> pending_;  // held for a thread, highest priority first; in in_hand_ too
  // Every job in hand (owned through these pointers: see link_locked and unlink_locked).
  Slot* in_hand_head_ = nullptr;
  Slot* in_hand_tail_ = nullptr;
  std::uint64_t submitted_count_ = 0;
  std::atomic<int> busy_{0};
  std::atomic<int> queued_{0};  // pending_.size(), readable without the lock
  int waiting_ = 0;             // threads waiting for work_ready_
  // Jobs a thread took that have not left: at most capacity_ are started (with jobs handed
  // over, threads no longer bound them). Those handed over are the ones left once the
  // threads have exited.
  int running_ = 0;
  // A job leaving the pool calls SlotFreed for the fetcher once at least this many jobs
  // are claimable (with prefetch or not: wake_prefetch_), then it is reset to kNoSlotWake
  // until armed again; kEverySlot until the fetcher arms it.
  static constexpr int kEverySlot = -1;
  static constexpr int kNoSlotWake = 0;
  int wake_wanted_ = kEverySlot;
  bool wake_prefetch_ = true;
  PrefetchBudget prefetch_;
  bool stopping_ = false;
  bool interrupted_ = false;
  // Declared last: threads are joined before the state they use is destroyed.
  std::vector<std::thread> threads_;
};

}  // namespace pgjobd
