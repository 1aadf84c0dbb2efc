#pragma once
// One attempt at one job: the identity every write about a running job is fenced on
// (with the daemon's worker id). The pool, the runner, the completer, heartbeats and the
// engine all name an attempt with this type.

#include <compare>
#include <cstdint>

namespace pgjobd {

struct JobAttempt {
  std::int64_t id = 0;
  int attempt = 0;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  friend auto operator<=>(const JobAttempt&, const JobAttempt&) = default;
};

}  // namespace pgjobd
