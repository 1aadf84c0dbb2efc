#pragma once
// How a job leaves the worker thread that started it: ended there, or handed over to a
// handler that ends it later on a thread of its own (AsyncHandler).

#include <functional>
#include <optional>

#include "store/job_store.hpp"

namespace pgjobd {

// Receives a handed-over job's completion (nothing when the handler wrote its own), once.
using JobFinish = std::function<void(std::optional<Completion> completion)>;

struct JobStarted {
  // True: the job runs on; its JobFinish is called when it ends, perhaps already was.
  bool handed_off = false;
  // When not handed off: the completion to write, or nothing when the handler wrote its own.
  std::optional<Completion> completion;
};

}  // namespace pgjobd
