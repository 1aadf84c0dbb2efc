// DeadLetterSync: handlers.TYPE.dead_letter written at start and after reloads.

#include "engine/dead_letter_sync.hpp"

#include <spdlog/spdlog.h>

#include <utility>

namespace pgjobd {

DeadLetterSync::DeadLetterSync(std::string worker_id, std::shared_ptr<DeadLetterStore> store,
                               const std::map<std::string, HandlerConfig>& handlers)
    : worker_id_(std::move(worker_id)), store_(std::move(store)), wanted_(wanted_of(handlers)) {}

DeadLetterSync::Wanted DeadLetterSync::wanted_of(
    const std::map<std::string, HandlerConfig>& handlers) {
  Wanted wanted;
  for (const auto& [type, handler] : handlers) {
    wanted.served.push_back(type);
    if (handler.dead_letter) wanted.dead_letters.emplace(type, *handler.dead_letter);
  }
  return wanted;
}

void DeadLetterSync::set_handlers(const std::map<std::string, HandlerConfig>& handlers) {
  Wanted wanted = wanted_of(handlers);
  {
    std::lock_guard lock(mutex_);
    if (wanted == wanted_) return;
    wanted_ = std::move(wanted);
  }
  requested_ = true;
  wake_loop();
}

void DeadLetterSync::begin(Clock::time_point /*now*/) {}

DeadLetterSync::Clock::time_point DeadLetterSync::due() const {
  // Requested: due since the steady clock's epoch (long past; no overflow in the wait).
  return requested_ ? Clock::time_point{} : retry_at_;
}

void DeadLetterSync::run(Clock::time_point now, const std::stop_token& /*stop*/,
                         MaintenanceCalls& calls) {
  requested_ = false;
  retry_at_ = Clock::time_point::max();
  calls.guarded("dead letters", [&] { sync(); });
  if (calls.last_failed()) retry_at_ = now + kRetryInterval;
}

void DeadLetterSync::sync() {
  Wanted wanted;
  {
    std::lock_guard lock(mutex_);
    wanted = wanted_;
  }
  for (const DeadLetterOverwrite& row :
       store_->sync_dead_letters(wanted.dead_letters, wanted.served, worker_id_)) {
    const std::string previous =
        row.previous.type + (row.previous.queue.empty() ? "" : " in queue " + row.previous.queue);
    if (row.change == "removed") {
      spdlog::warn(
          "dead letters: removed the dead_letter of type {} ({}), written by {}: this daemon "
          "serves {} without one (make the daemons' handlers.{}.dead_letter agree)",
          row.type, previous, row.previous_writer, row.type, row.type);
    } else {
      const DeadLetterConfig& now = wanted.dead_letters[row.type];
      spdlog::warn(
          "dead letters: type {} now enqueues {}{}, replacing {} written by {} (make the "
          "daemons' handlers.{}.dead_letter agree)",
          row.type, now.type, now.queue.empty() ? "" : " in queue " + now.queue, previous,
          row.previous_writer, row.type);
    }
  }
}

}  // namespace pgjobd
