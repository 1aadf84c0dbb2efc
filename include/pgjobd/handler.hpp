#pragma once
// The handler contract: a callable that runs one job on a worker thread.

#include <functional>
#include <stop_token>
#include <utility>

#include "pgjobd/job.hpp"

namespace pgjobd {

// A handler runs one job and says how it went. It runs on a pool thread and may block.
// `stop` is requested when the daemon must stop the job (shutdown timeout, lost lease,
// pgjobd_cancel): long handlers should poll it and return promptly; the result is then
// ignored and the job released (a thrown exception too), or cancelled after a cancel,
// unless it is done, which stands. Otherwise a handler that throws fails its job (retry)
// with the exception's message.
using Handler = std::function<JobResult(const Job& job, std::stop_token stop)>;

// Receives a started job's result, exactly once, on whichever thread ended it.
using HandlerDone = std::function<void(JobResult result)>;

// A handler whose jobs wait without holding a thread (the http handler: one transfer thread
// drives all of its requests). Stored in a Handler, it runs a job like any other: started,
// then waited for. The worker pool looks for it (Handler::target<AsyncHandler>()) and hands
// the job over instead, its thread free for the next job while the request is in flight.
class AsyncHandler {
 public:
  // Starts the job and returns; `done` gets its result later (or before start returns). The
  // job and the stop token's source outlive that call. Throws only before it has started
  // anything, and then never calls `done`.
  using Start = std::function<void(const Job& job, std::stop_token stop, HandlerDone done)>;

  explicit AsyncHandler(Start start) : start_(std::move(start)) {}

  void start(const Job& job, std::stop_token stop, HandlerDone done) const {
    start_(job, std::move(stop), std::move(done));
  }
  // Runs the job on the calling thread: starts it and waits for its result.
  JobResult operator()(const Job& job, std::stop_token stop) const;

 private:
  Start start_;
};

}  // namespace pgjobd
