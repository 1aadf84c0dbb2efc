// FinishedNotifier: a bounded queue of ended jobs' ids, sent in batches on pgjobd_finished.

#include "engine/finished_notifier.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/loop_error.hpp"
#include "store/reconnect_backoff.hpp"
#include "text/escape.hpp"

namespace pgjobd {

FinishedNotifier::FinishedNotifier(std::unique_ptr<FinishedStore> store, std::string schema,
                                   Metrics& metrics)
    : store_(std::move(store)), schema_(std::move(schema)), metrics_(metrics) {}

FinishedNotifier::~FinishedNotifier() { stop(); }

void FinishedNotifier::start() {
  thread_.start([this](const std::stop_token& stop) { run(stop); });
}
void FinishedNotifier::request_stop() { thread_.request_stop(); }
void FinishedNotifier::join() { thread_.join(); }

void FinishedNotifier::set_enabled(bool enabled) {
  std::lock_guard lock(mutex_);
  enabled_ = enabled;
}

void FinishedNotifier::completions_written(const std::vector<Completion>& batch,
                                           std::size_t settled,
                                           const std::vector<JobAttempt>& held) {
  std::vector<std::int64_t> ids;
  ids.reserve(settled);
  for (std::size_t i = 0; i < settled; ++i) {
    const Completion& completion = batch[i];
    const Outcome outcome = completion.outcome;
    if (outcome != Outcome::kDone && outcome != Outcome::kDead && outcome != Outcome::kCancelled) {
      continue;  // a retry or a release: the job goes on
    }
    if (!held.empty() && std::find(held.begin(), held.end(), completion.job) != held.end()) {
      continue;  // not written yet: announced once its retry writes it
    }
    // A stale completion (the job was rescued meanwhile) is announced too: the store does not
    // say which of the batch were stale, and a waiter reads the job's status anyway.
    ids.push_back(completion.job.id);
  }
  if (!ids.empty()) add(ids);
}

void FinishedNotifier::job_ended(std::int64_t id) { add({id}); }

void FinishedNotifier::add(const std::vector<std::int64_t>& ids) {
  std::size_t dropped = 0;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    if (!enabled_) return;
    const std::size_t room = kMaxQueued - std::min(queue_.size(), kMaxQueued);
    const std::size_t taken = std::min(room, ids.size());
    dropped = ids.size() - taken;
    wake = queue_.empty() && taken > 0;
    queue_.insert(queue_.end(), ids.begin(), ids.begin() + static_cast<long>(taken));
  }
  if (dropped > 0) metrics_.finished_unannounced(dropped);
  if (wake) cv_.notify_one();
}

std::vector<std::string> FinishedNotifier::payloads(const std::string& schema,
                                                    const std::vector<std::int64_t>& ids) {
  std::string head = R"({"schema":)";
  append_json_string(head, schema);
  head += R"(,"ids":[)";
  const std::string tail = "]}";
  std::vector<std::string> out;
  std::string payload;
  for (const std::int64_t id : ids) {
    const std::string number = std::to_string(id);
    if (!payload.empty() && payload.size() + 1 + number.size() + tail.size() > kMaxPayloadBytes) {
      out.push_back(payload + tail);
      payload.clear();
    }
    payload += payload.empty() ? head : ",";
    payload += number;
  }
  if (!payload.empty()) out.push_back(payload + tail);
  return out;
}

void FinishedNotifier::run(const std::stop_token& stop) {
  ReconnectBackoff backoff;
  std::vector<std::int64_t> ids;
  std::unique_lock lock(mutex_);
  while (true) {
    cv_.wait(lock, stop, [&] { return !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    ids.clear();
    ids.swap(queue_);  // every id that arrived meanwhile: one transaction for them all
    const bool stopping = stop.stop_requested();
    lock.unlock();
    bool sent = false;
    try {
      store_->announce_finished(payloads(schema_, ids));
      sent = true;
      backoff.reset();
    } catch (const std::exception& e) {
      // Dropped, not kept: while the session is down the ids would pile up, and a waiter
      // re-reads the job at its timeout. Its completions are written all the same.
      count_loop_error(&metrics_, "complete", "notify finished", e);
      metrics_.finished_unannounced(ids.size());
      spdlog::warn("cannot announce {} finished job(s) on pgjobd_finished, dropped: {}", ids.size(),
                   e.what());
    }
    lock.lock();
    if (!sent && stopping) {
      metrics_.finished_unannounced(queue_.size());
      queue_.clear();
      return;
    }
    // After a send, gather for kGather: the ids of the completions meanwhile go out in one
    // transaction, at most 1/kGather of them per second whatever the completion rate (one
    // per completion batch cost 13% of a no-op burst's throughput with nobody listening:
    // bench/README "Results and workflows"). After a failure, wait out the backoff (ids
    // queue up meanwhile, up to kMaxQueued). A stop request ends either wait, for one last
    // try.
    cv_.wait_for(lock, stop, sent ? kGather : backoff.next(), [] { return false; });
  }
}

}  // namespace pgjobd
