#pragma once
// What this daemon knows of the limits every daemon applies (README "Limits"). The
// definitions live in the database: a daemon with a `limits:` section writes it there at
// start and at each reload, and every daemon reads them back regularly (and at once on the
// NOTIFY a change sends). The claim asks active(): with no limit anywhere the plain claim
// statement runs, so limits cost nothing until someone defines one.
//
// Thread-safe: the maintenance loop syncs and refreshes, the fetcher reads active().

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "store/limit_store.hpp"

namespace pgjobd {

class LimitRegistry {
 public:
  using Limits = std::map<std::string, LimitConfig>;

  // configured: the daemon's `limits:` section; nullopt when it has none (it then writes
  // nothing and applies what the database holds).
  LimitRegistry(std::optional<Limits> configured, std::string worker_id);

  // A limit exists, so claims must count partitions and take tokens. True until the first
  // successful read, and while this daemon's section waits to be written: the limited claim
  // is right whatever the database holds, the plain one only when it holds no limit.
  bool active() const { return active_.load(std::memory_order_acquire); }
  // Claims may take jobs beyond the free workers (worker.prefetch): no limit, or no keyed
  // rate limit. Those stay exact with prefetch: a claimed job counts against a concurrency
  // limit from its claim (its row is running) whether a worker runs it yet or not, and an
  // unkeyed rate limit's bucket refills only up to its burst less the jobs held for a
  // worker, so that they cannot reach their handlers bunched above the rate
  // (sql/functions/pgjobd_claim_limited.sql); a keyed rate limit's partitions do not count
  // held jobs. A claim over many partitions of a keyed concurrency limit takes the limit's
  // lock instead of one per partition, so it is not cut at 128 partitions. False until the
  // first read, like active().
  bool prefetch_allowed() const { return prefetch_allowed_.load(std::memory_order_acquire); }

  // Writes the configured limits when a write is pending (start, reload), then reads the
  // definitions back. Logs what changed, and warns when this daemon's section differs from
  // what the database holds. Throws DbError; a failed write stays pending. A write another
  // session's lock kept out (LimitStore::sync_limits, busy) stays pending too, logged once
  // with what holds the lock; active() stays true until it is written.
  void sync(LimitStore& store);
  // The claim session's own read, before its first claim (Fetcher), unless a read was
  // applied already. Without it a daemon that has no `limits:` section claims with the
  // limited claim until the maintenance loop's first sync, on another connection: daemons
  // started together then read the same unlocked candidates and came back empty, for up
  // to a second each (bench/README "Through PgBouncer"). Throws DbError.
  void read_before_first_claim(LimitReader& store);
  // A plain claim found a limit this registry did not know of (LimitsExist): claims are
  // limited, without prefetch, from now on, and the definitions are read on the claim's
  // session. Throws DbError from the read; the claims stay limited until a read succeeds.
  void found_by_claim(LimitReader& store);
  // Reload: the next sync() writes these.
  void set_configured(std::optional<Limits> configured);
  // Called (on the thread that read, after the read) when prefetch_allowed() turns true:
  // claims may then take jobs beyond the free workers (worker.prefetch), so a claim loop waiting
  // for a worker's slot must look again. (A daemon starts with limits active, and its first claims
  // come before the first sync when the claim session's own read failed.) Set before the
  // first read.
  void set_on_lifted(std::function<void()> on_lifted);
  // Whether sync() has a write to make (so the maintenance loop does not wait for its
  // next interval).
  bool write_pending() const;

  std::vector<LimitDefinition> definitions() const;
  // The smallest `concurrency` of the unkeyed limits that match every job of these queues
  // and types (0: none does). No more of a daemon's jobs serving only those can run at
  // once, so it holds no more (Fetcher): its claims beyond that would only find the limit
  // full of its own jobs, and wait.
  int covering_concurrency(const std::vector<std::string>& queues,
                           const std::vector<std::string>& types) const;
  // Exactly one limit matches any of these queues and types, and it is an unkeyed
  // concurrency limit without a rate that matches every one of them: the claim may take
  // the limit's room and then claim plainly (ClaimRequest::one_concurrency_limit). The
  // database's pgjobd_limits_met (sql/functions/pgjobd_claim_room.sql) decides the same from
  // the table itself at each claim; this only spares its round trip when it cannot be so.
  bool one_concurrency_limit(const std::vector<std::string>& queues,
                             const std::vector<std::string>& types) const;

  // Claims a limit held due jobs back in (the fetcher counts them). A daemon whose due jobs
  // wait for a limit is not idle: its maintenance keeps rescuing at the busy interval, so
  // the places a dead daemon held return within a lease and a rescue interval.
  void count_hold() const { holds_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t holds() const { return holds_.load(std::memory_order_relaxed); }

 private:
  // Takes the definitions read from the database by the read numbered `read` (numbered when
  // asked). The claim session and the maintenance loop
  // read on two connections, so their answers may arrive out of order: one asked before
  // the last applied read is older than it, and dropped. True when that allowed prefetch.
  bool apply_loaded(std::vector<LimitDefinition> loaded, std::uint64_t read);
  // Loads the definitions as read number `read` and applies them (on_lifted when prefetch
  // became allowed).
  void load(LimitReader& store, std::uint64_t read);
  // Under mutex_: whether the database's definitions differ from the configured ones.
  bool differs_from_configured(const std::vector<LimitDefinition>& loaded) const;

  const std::string worker_id_;
  mutable std::mutex mutex_;
  std::optional<Limits> configured_;
  bool write_pending_ = false;
  std::vector<LimitDefinition> definitions_;
  bool warned_ = false;  // the current difference was logged
  // Since when writes found the limits' lock held (logged once, then when written).
  std::optional<std::chrono::steady_clock::time_point> busy_since_;
  std::uint64_t reads_asked_ = 0;   // numbers the reads in the order they were asked
  std::uint64_t read_applied_ = 0;  // the number of the read definitions_ come from
  std::atomic<bool> active_{true};
  std::atomic<bool> prefetch_allowed_{false};
  std::function<void()> on_lifted_;
  mutable std::atomic<std::uint64_t> holds_{0};
};

}  // namespace pgjobd
