#pragma once
// The embeddable engine: claims jobs from PostgreSQL, runs them on a bounded pool and
// records the outcome. The pgjobd binary is a thin wrapper around this class; an embedder
// links the CMake target pgjobd::engine alone. README.md ("In-process C++ handlers") has
// a complete example, which the tests compile against that target (readme_embedding_example):
//
//   pgjobd::Engine engine(pgjobd::load_config("pgjobd.yaml"));
//   engine.register_handler("resize", [](const pgjobd::Job& job, std::stop_token) {
//     resize(job.payload);
//     return pgjobd::JobResult::done();
//   });
//   engine.start();
//   ...
//   engine.drain();  // stop claiming, wait for running jobs, release the rest

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"

namespace pgjobd {

class Database;        // the seam to the database (src/store/database.hpp); internal
struct EngineTimings;  // test-only intervals (src/engine/engine_factory.hpp); internal

class Engine {
 public:
  explicit Engine(const Config& config);
  ~Engine();  // drains if still running
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // Registers an in-process handler for a job type; overrides a configured handler of the
  // same type. Call before start().
  void register_handler(const std::string& type, Handler handler);

  // Connects, checks (or applies) the schema and starts the threads. Throws on a fatal
  // start-up error (schema missing or too new, bad handler config).
  void start();

  // Soft stop, then hard stop: stop claiming; wait up to config.shutdown.timeout for
  // running jobs; request stop of those still running and release them to the queue;
  // flush completions. Blocks until done. Safe to call twice.
  void drain();

  // After drain(): how many completions (outcomes of finished or released jobs) it could
  // not write by its flush deadline, the database being unreachable. Their jobs stay
  // running in the table until their leases expire, then return to the queue. 0 before a
  // drain and after one that wrote everything. Thread-safe.
  int unwritten_completions() const;

  // Thread-safe: makes a start() that is still waiting for the database return early
  // (a SIGTERM during start-up). drain() must still be called.
  void request_stop();

  // Ends a drain's wait for running jobs at once (the second SIGTERM). Thread-safe.
  void hurry();

  // Applies a new configuration live (SIGHUP); running jobs are never interrupted. Which
  // keys a reload applies and which need a restart is declared once, in
  // src/config/config_keys.cpp (the README's table shows it): the returned messages name the
  // restart-only keys that changed, whose old values stay in force. Throws (and keeps the
  // old configuration entirely) when a handler cannot be built.
  std::vector<std::string> reload(const Config& config);

  // Counts a reload rejected before it reached the engine (the new file did not parse).
  void reload_rejected();

  // Wakes the fetcher as a NOTIFY would (tests, embedders that enqueue in-process).
  void wake();

  // The TCP port the HTTP endpoint listens on (0 when disabled). Useful with port 0.
  int http_port() const;

  // This daemon's identity in locked_by: host:pid:random.
  const std::string& worker_id() const;

  // The longest drain() takes when every database call returns within its deadline:
  // shutdown.timeout, then the stop grace of the handlers (the largest kill_grace + 1 s),
  // then the last completion flush (lease.duration, at most 10 s). Follows reloads.
  // Thread-safe.
  std::chrono::milliseconds drain_bound() const;

  // What drain() is doing now, e.g. "waiting for running jobs" or "writing the last
  // completions"; empty before a drain. Thread-safe.
  std::string drain_stage() const;

  // Jobs currently running on the pool.
  int busy_workers() const;

  // False when the claim loop has made no progress for far longer than it ever waits
  // (a wedged daemon). Feeds the systemd watchdog. Thread-safe.
  bool responsive() const;

 private:
  class Impl;
  // Tests build an engine over a fake database (src/engine/engine_factory.hpp).
  friend Engine make_engine(Config config, std::shared_ptr<Database> database);
  friend Engine make_engine(Config config, std::shared_ptr<Database> database,
                            const EngineTimings& timings);
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pgjobd
