#pragma once
// worker.scheduling: the CPU scheduling policy of the daemon's threads.
//
// Under `batch` (Linux's SCHED_BATCH) a thread that wakes up (an HTTP response came, the
// database answered) does not preempt the thread running on its core: it waits for that
// thread's time slice to end, by which time more responses have usually come, and takes
// them in one wake-up. On a host whose cores are all busy (the daemon beside the services
// its jobs call and PostgreSQL) that is 4-5x fewer context switches and a fifth less of
// the daemon's CPU per http job (bench/README.md, "SCHED_BATCH, and the claim by ctid"); a
// woken thread may wait up to a time slice (a few ms) longer, and only while every core is
// busy. The policy
// is the kernel's, no privilege is needed, nice values are unchanged.
//
// Threads inherit the policy of the thread that starts them, and processes that of their
// parent: so the daemon enters it before it starts any thread, and the programs of exec
// jobs start under the policy the daemon had before (ChildProcess), as if it had never
// changed.

#include <sched.h>

#include <optional>
#include <string>

namespace pgjobd {

struct SchedulingPolicy {
  int policy = SCHED_OTHER;
  int priority = 0;  // sched_priority: 0 but for the real-time policies
};

// The calling thread's policy.
SchedulingPolicy current_scheduling_policy();

// Puts the calling thread under SCHED_BATCH (the threads it starts from then on inherit
// it) and records the policy it had for programs_scheduling_policy(). Call it before the
// process starts other threads (the record is read by them without a lock). Returns ""
// or why the kernel refused (the thread then keeps its policy).
std::string enter_batch_scheduling();

// The policy a job's program is started under: the one the daemon had before
// enter_batch_scheduling(); nullopt when it never entered it (the program inherits).
std::optional<SchedulingPolicy> programs_scheduling_policy();

}  // namespace pgjobd
