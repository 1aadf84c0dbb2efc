#pragma once
// Dead letters (README "Dead letters"): writes this daemon's handlers.TYPE.dead_letter to
// pgjobd_dead_letters (the rows of the types it serves: those with a dead_letter upserted,
// the others deleted) when the loop starts and after each reload that changed them. The
// trigger that enqueues the dead-letter jobs reads the table, so what a daemon writes
// applies to every daemon's dead jobs of those types: a row another daemon wrote
// differently is overwritten with a warning naming both.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/maintenance_loop.hpp"
#include "pgjobd/config.hpp"
#include "store/maintenance_stores.hpp"

namespace pgjobd {

class DeadLetterSync final : public MaintenanceTask {
 public:
  DeadLetterSync(std::string worker_id, std::shared_ptr<DeadLetterStore> store,
                 const std::map<std::string, HandlerConfig>& handlers);

  // From any thread (a reload): writes `handlers`' settings soon, if they differ from the
  // last ones asked for.
  void set_handlers(const std::map<std::string, HandlerConfig>& handlers);

  void begin(Clock::time_point now) override;
  Clock::time_point due() const override;
  void run(Clock::time_point now, const std::stop_token& stop, MaintenanceCalls& calls) override;

 private:
  struct Wanted {
    std::map<std::string, DeadLetterConfig> dead_letters;
    std::vector<std::string> served;

    bool operator==(const Wanted&) const = default;
  };
  static Wanted wanted_of(const std::map<std::string, HandlerConfig>& handlers);
  void sync();

  // A failed write is tried again this long after.
  static constexpr std::chrono::seconds kRetryInterval{5};

  const std::string worker_id_;
  const std::shared_ptr<DeadLetterStore> store_;
  mutable std::mutex mutex_;
  Wanted wanted_;                      // under mutex_
  std::atomic<bool> requested_{true};  // written after the last change? (first: at start)
  Clock::time_point retry_at_ = Clock::time_point::max();  // the loop's thread
};

}  // namespace pgjobd
