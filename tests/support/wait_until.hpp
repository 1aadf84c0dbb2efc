#pragma once
// Waiting for a condition in tests: polling with an upper bound that only a failure reaches.

#include <chrono>
#include <functional>

namespace pgjobd::testing {

// Polls `condition` every few milliseconds until it holds or `timeout` passes; returns
// whether it held. For state that lives in the database, another process or an engine
// part that offers no signal to wait on. The timeout is a bound for failure, never a delay
// a test relies on.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

}  // namespace pgjobd::testing
