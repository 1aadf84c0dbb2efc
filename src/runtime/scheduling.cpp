#include "runtime/scheduling.hpp"

#include <cerrno>
#include <system_error>

namespace pgjobd {
namespace {

// Written once, before the threads that read it start (enter_batch_scheduling's contract).
std::optional<SchedulingPolicy> g_programs_policy;

}  // namespace

SchedulingPolicy current_scheduling_policy() {
  SchedulingPolicy current;
  current.policy = ::sched_getscheduler(0);
  sched_param param{};
  if (::sched_getparam(0, &param) == 0) current.priority = param.sched_priority;
  return current;
}

std::string enter_batch_scheduling() {
  const SchedulingPolicy before = current_scheduling_policy();
  if (before.policy < 0) return std::generic_category().message(errno);
  // SCHED_BATCH takes priority 0; the nice value stays as it is.
  const sched_param param{};
  if (::sched_setscheduler(0, SCHED_BATCH, &param) != 0) {
    return std::generic_category().message(errno);
  }
  if (!g_programs_policy) g_programs_policy = before;
  return {};
}

std::optional<SchedulingPolicy> programs_scheduling_policy() { return g_programs_policy; }

}  // namespace pgjobd
