#pragma once
// The exec handler: runs a program per job (no shell), payload JSON on stdin.

#include <cstddef>

#include "handlers/exec_environment.hpp"
#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"

namespace pgjobd {

// Builds a handler from an exec HandlerConfig (exec_argv, permanent_exit_codes, timeout,
// kill_grace). Contract:
// - argv as given, no shell; payload on stdin (then closed);
// - stdout is the result of a job done (exit 0): read to the end, its first
//   max_result_bytes + 1 bytes kept and its size counted (the job runner stores it as JSON,
//   or a JSON string of the text, bounded; README "Results"); 0 keeps none;
// - environment: the daemon's, plus PGJOBD_JOB_ID, PGJOBD_JOB_TYPE, PGJOBD_JOB_QUEUE and
//   PGJOBD_JOB_ATTEMPT, less the daemon's credentials (`withheld`) and control channels
//   (build_child_environment);
// - the child leads its own process group, with default signal dispositions and an empty
//   signal mask (the daemon blocks SIGTERM in all threads);
// - exit 0 → done; an exit code in permanent_exit_codes → dead; any other exit or a
//   signal → retry;
// - on timeout or when `stop` is requested: SIGTERM to the whole group, kill_grace later
//   SIGKILL; timeout → retry with "timed out after 30s"; stop → released;
// - after the child exits the group is SIGKILLed so no grandchild outlives the job, and
//   the child is always reaped (no zombie);
// - last_error holds the last 4 KiB of stderr (with the exit status), so memory stays
//   bounded however much the child prints.
Handler make_exec_handler(const HandlerConfig& config, WithheldCredentials withheld,
                          std::size_t max_result_bytes);

}  // namespace pgjobd
