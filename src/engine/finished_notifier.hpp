#pragma once
// Announces the jobs this daemon ended (done, dead, cancelled) on the pgjobd_finished
// channel, so that an application waiting for a result needs no polling (README "Results
// and workflows"). Told after each completion batch committed, it sends from a thread and
// session of its own, never inside the completion transaction: a NOTIFY holds PostgreSQL's
// server-wide notification lock from its transaction's pre-commit through its commit
// (sql/functions/pgjobd_notify_insert.sql), and in the completer's transactions it would
// serialise the completions of every daemon of the server. The completer only appends ids
// to a bounded queue: when the session is down, or the queue is full, ids are dropped and
// counted (pgjobd_finished_unannounced_total) rather than kept without bound; a waiter's
// timeout re-check covers them.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "metrics/metrics.hpp"
#include "runtime/service.hpp"
#include "store/completion_store.hpp"
#include "store/finished_store.hpp"

namespace pgjobd {

class FinishedNotifier final : public Service {
 public:
  // schema: the name the payloads carry (database.schema). The store connects on first use,
  // so a daemon that announces nothing opens no session.
  FinishedNotifier(std::unique_ptr<FinishedStore> store, std::string schema, Metrics& metrics);
  ~FinishedNotifier() override;  // stop()
  FinishedNotifier(const FinishedNotifier&) = delete;
  FinishedNotifier& operator=(const FinishedNotifier&) = delete;

  // Stopping sends what is queued once more, then ends.
  void start() override;
  void request_stop() override;
  void join() override;

  // worker.notify_finished (live reload): while false, nothing is queued.
  void set_enabled(bool enabled);

  // The completer's hook, after a write committed: of batch[0, settled), the completions that
  // end their job (done, dead, cancelled), except those found `held` (not written). Never
  // waits for the database.
  void completions_written(const std::vector<Completion>& batch, std::size_t settled,
                           const std::vector<JobAttempt>& held);
  // A job whose handler wrote its end itself and committed it (the sql handler).
  void job_ended(std::int64_t id);

  // The payloads announcing `ids`: {"schema":"<schema>","ids":[...]}, as many as needed for
  // each to stay within kMaxPayloadBytes.
  static std::vector<std::string> payloads(const std::string& schema,
                                           const std::vector<std::int64_t>& ids);

  // PostgreSQL refuses a NOTIFY payload of 8000 bytes or more.
  static constexpr std::size_t kMaxPayloadBytes = 7900;
  // Ids waiting to be sent, at most (800 KB): beyond it they are dropped and counted.
  static constexpr std::size_t kMaxQueued = 100000;
  // How long ids gather after a send before the next one: what a waiter may wait beyond
  // the completion's commit.
  static constexpr std::chrono::milliseconds kGather{10};

 private:
  void run(const std::stop_token& stop);
  // Queues `ids` (under the lock), dropping those beyond kMaxQueued.
  void add(const std::vector<std::int64_t>& ids);

  const std::unique_ptr<FinishedStore> store_;
  const std::string schema_;
  Metrics& metrics_;

  std::mutex mutex_;  // guards the members below
  std::condition_variable_any cv_;
  std::vector<std::int64_t> queue_;
  bool enabled_ = true;
  ServiceThread thread_;  // last: joined before the members it uses go away
};

}  // namespace pgjobd
