#pragma once
// An Engine over a database of the caller's choosing: the unit tests give it a fake, so
// the whole start and drain sequence runs without PostgreSQL. Engine(Config) is this
// with a PgDatabase.

#include <memory>

#include "pgjobd/engine.hpp"
#include "store/database.hpp"

namespace pgjobd {

// Intervals a daemon never changes, which tests shorten so that what takes a minute in
// production is observed in a second; the logic that uses them stays the same.
struct EngineTimings {
  // How long past poll.max_interval the claim loop may go without progress before
  // responsive() (the systemd watchdog) calls the daemon wedged. A minute: far beyond any
  // wait of a healthy loop, well within the watchdog's own timeout.
  Millis watchdog_slack{60000};
  // The fetcher's longest single wait while the pool is full (Fetcher::Options).
  Millis progress_slice{1000};
  // How often an idle scheduler reads the schedules table (schedule::SchedulerSettings).
  Millis schedule_refresh{30000};
  // How long start() lets the first claim go before it starts the parts with sessions of
  // their own (maintenance, listener, scheduler): see Engine::Impl::start.
  Millis first_claim_head_start{250};
};

Engine make_engine(Config config, std::shared_ptr<Database> database);
Engine make_engine(Config config, std::shared_ptr<Database> database, const EngineTimings& timings);

}  // namespace pgjobd
