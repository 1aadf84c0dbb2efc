// LimitRegistry: writes this daemon's limits, reads everyone's back.

#include "limits/limit_registry.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace pgjobd {

LimitRegistry::LimitRegistry(std::optional<Limits> configured, std::string worker_id)
    : worker_id_(std::move(worker_id)),
      configured_(std::move(configured)),
      write_pending_(configured_.has_value()) {}

void LimitRegistry::set_configured(std::optional<Limits> configured) {
  std::lock_guard lock(mutex_);
  configured_ = std::move(configured);
  write_pending_ = configured_.has_value();
  warned_ = false;
}

bool LimitRegistry::write_pending() const {
  std::lock_guard lock(mutex_);
  return write_pending_;
}

std::vector<LimitDefinition> LimitRegistry::definitions() const {
  std::lock_guard lock(mutex_);
  return definitions_;
}

namespace {

// Empty in a limit: any. Every one of `wanted` is among `listed`.
bool covers(const std::vector<std::string>& listed, const std::vector<std::string>& wanted) {
  return listed.empty() || std::all_of(wanted.begin(), wanted.end(), [&](const auto& name) {
           return std::find(listed.begin(), listed.end(), name) != listed.end();
         });
}

// Empty in a limit: any. Some of `wanted` is among `listed`.
bool meets(const std::vector<std::string>& listed, const std::vector<std::string>& wanted) {
  return listed.empty() || std::any_of(wanted.begin(), wanted.end(), [&](const auto& name) {
           return std::find(listed.begin(), listed.end(), name) != listed.end();
         });
}

}  // namespace

int LimitRegistry::covering_concurrency(const std::vector<std::string>& queues,
                                        const std::vector<std::string>& types) const {
  int smallest = 0;
  std::lock_guard lock(mutex_);
  for (const LimitDefinition& definition : definitions_) {
    const LimitConfig& limit = definition.limit;
    if (limit.concurrency <= 0 || !limit.key.empty()) continue;
    if (!covers(limit.types, types) || !covers(limit.queues, queues)) continue;
    if (smallest == 0 || limit.concurrency < smallest) smallest = limit.concurrency;
  }
  return smallest;
}

bool LimitRegistry::one_concurrency_limit(const std::vector<std::string>& queues,
                                          const std::vector<std::string>& types) const {
  std::lock_guard lock(mutex_);
  const LimitConfig* one = nullptr;
  for (const LimitDefinition& definition : definitions_) {
    if (!meets(definition.limit.types, types) || !meets(definition.limit.queues, queues)) continue;
    if (one != nullptr) return false;
    one = &definition.limit;
  }
  return one != nullptr && one->concurrency > 0 && one->key.empty() && one->rate_per_second <= 0 &&
         covers(one->types, types) && covers(one->queues, queues);
}

bool LimitRegistry::differs_from_configured(const std::vector<LimitDefinition>& loaded) const {
  if (!configured_) return false;
  if (loaded.size() != configured_->size()) return true;
  for (const LimitDefinition& definition : loaded) {
    const auto mine = configured_->find(definition.name);
    if (mine == configured_->end()) return true;
    LimitConfig expected = mine->second;
    expected.rate.clear();  // loaded without it: "60/m" and "1/s" are the same limit
    if (!(expected == definition.limit)) return true;
  }
  return false;
}

void LimitRegistry::sync(LimitStore& store) {
  std::optional<Limits> to_write;
  {
    std::lock_guard lock(mutex_);
    if (write_pending_) to_write = configured_;
  }
  if (to_write) {
    const LimitSync written = store.sync_limits(*to_write, worker_id_);
    if (!written.busy.empty()) {
      // Nothing written; the write stays pending and the loop asks again within a second.
      std::lock_guard lock(mutex_);
      if (!busy_since_) {
        busy_since_ = std::chrono::steady_clock::now();
        spdlog::warn(
            "limits: this daemon's limits: section is not written yet: another session holds {}; "
            "claims apply the limits the database holds until it is written; trying again "
            "within a second",
            written.busy);
      }
    }
    for (const LimitChange& change : written.changes) {
      if (!change.previous_writer.empty() && change.previous_writer != worker_id_) {
        spdlog::warn(
            "limit {} {}: its definition by {} differed from this daemon's limits: section; "
            "every daemon now applies this one",
            change.name, change.change, change.previous_writer);
      } else {
        spdlog::info("limit {} {}", change.name, change.change);
      }
    }
    if (written.busy.empty()) {
      std::lock_guard lock(mutex_);
      if (busy_since_) {
        spdlog::info(
            "limits: written after {:.1f}s waiting for another session's lock",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - *busy_since_).count());
        busy_since_.reset();
      }
      // A reload meanwhile asked for another write: keep it pending.
      if (configured_ == to_write) write_pending_ = false;
    }
  }
  std::uint64_t read = 0;
  {
    std::lock_guard lock(mutex_);
    read = ++reads_asked_;
  }
  load(store, read);
}

void LimitRegistry::read_before_first_claim(LimitReader& store) {
  std::uint64_t read = 0;
  {
    std::lock_guard lock(mutex_);
    if (read_applied_ != 0) return;  // a sync (prepare_limits, or the loop's first) came first
    read = ++reads_asked_;
  }
  load(store, read);
}

void LimitRegistry::found_by_claim(LimitReader& store) {
  std::uint64_t read = 0;
  {
    std::lock_guard lock(mutex_);
    // The safe claim until the read says what the limits allow; a read asked before this
    // one and answered after it would turn it back, and is dropped (apply_loaded).
    active_.store(true, std::memory_order_release);
    prefetch_allowed_.store(false, std::memory_order_release);
    read = ++reads_asked_;
    read_applied_ = read;
  }
  spdlog::info("limits: a claim found a limit this daemon had not read yet; reading them");
  load(store, read);
}

void LimitRegistry::load(LimitReader& store, std::uint64_t read) {
  std::vector<LimitDefinition> loaded = store.load_limits();
  if (apply_loaded(std::move(loaded), read) && on_lifted_) on_lifted_();
}

void LimitRegistry::set_on_lifted(std::function<void()> on_lifted) {
  on_lifted_ = std::move(on_lifted);
}

bool LimitRegistry::apply_loaded(std::vector<LimitDefinition> loaded, std::uint64_t read) {
  std::lock_guard lock(mutex_);
  if (read < read_applied_) return false;  // older than what applies: the next read corrects
  read_applied_ = read;
  // While this daemon's own write is pending the database cannot hold its section yet.
  const bool differs = !write_pending_ && differs_from_configured(loaded);
  if (differs && !warned_) {
    spdlog::warn(
        "the limits in the database differ from this daemon's limits: section (another "
        "daemon wrote its own since): this daemon applies the database's, as every daemon "
        "does; give all daemons the same section");
  }
  warned_ = differs;
  if (loaded != definitions_) {
    if (!loaded.empty() && !configured_) {
      spdlog::info("applying {} limit(s) from the database", loaded.size());
    }
    definitions_ = std::move(loaded);
  }
  // A section not written yet (another session holds the lock) keeps the limited claim:
  // it applies what the database holds, and stays right once the section is written.
  const bool active =
      !definitions_.empty() || (write_pending_ && configured_ && !configured_->empty());
  // prefetch_allowed(): no keyed rate limit (the jobs held under a rate limit are counted
  // by its one bucket, sql/functions/pgjobd_claim_limited.sql).
  const auto holds_prefetch = [](const LimitConfig& limit) {
    return !limit.key.empty() && limit.rate_per_second > 0;
  };
  bool held = std::any_of(definitions_.begin(), definitions_.end(),
                          [&](const LimitDefinition& d) { return holds_prefetch(d.limit); });
  if (write_pending_ && configured_) {
    held = held || std::any_of(configured_->begin(), configured_->end(),
                               [&](const auto& entry) { return holds_prefetch(entry.second); });
  }
  active_.store(active, std::memory_order_release);
  const bool allowed = !active || !held;
  return !prefetch_allowed_.exchange(allowed, std::memory_order_acq_rel) && allowed;
}

}  // namespace pgjobd
