#pragma once
// Claim requests for the store tests: the lease they claim with and the common shape, n
// jobs of some types from one queue.

#include <map>
#include <string>
#include <vector>

#include "store/job_store.hpp"

namespace pgjobd::testing {

inline constexpr Millis kLease{30000};

// Free slots by queue, as a claim request or the pool reports them.
using Slots = std::map<std::string, int>;
inline Slots as_map(const std::vector<QueueSlots>& slots) {
  Slots map;
  for (const auto& slot : slots) map[slot.queue] = slot.free;
  return map;
}

inline ClaimRequest claim_of(int n, const std::vector<std::string>& types = {"a"},
                             const std::string& worker = "w",
                             const std::string& queue = "default") {
  return {{{queue, n}}, types, n, worker, kLease};
}

}  // namespace pgjobd::testing
