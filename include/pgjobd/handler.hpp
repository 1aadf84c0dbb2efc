#pragma once
// The handler contract: a callable that runs one job on a worker thread.

#include <functional>
#include <stop_token>

#include "pgjobd/job.hpp"

namespace pgjobd {

// A handler runs one job and says how it went. It runs on a pool thread and may block.
// `stop` is requested when the daemon must stop the job (shutdown timeout, lost lease,
// pgjobd_cancel): long handlers should poll it and return promptly; the result is then
// ignored and the job released (a thrown exception too), or cancelled after a cancel,
// unless it is done, which stands. Otherwise a handler that throws fails its job (retry)
// with the exception's message.
using Handler = std::function<JobResult(const Job& job, std::stop_token stop)>;

}  // namespace pgjobd
