#pragma once
// The pgjobd subcommands. Each returns the process exit code: 0 ok, 1 runtime failure,
// 2 usage or config error; `pgjobd run` adds the two below (README, "Signals").

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/config_loading.hpp"
#include "db/admin/admin_session.hpp"
#include "pgjobd/config.hpp"

namespace pgjobd {
namespace ui {
class UiServer;
}

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// The drain outlived its bound (Engine::drain_bound() + kShutdownMargin after the first
// SIGTERM) and the daemon ended itself without finishing it.
inline constexpr int kExitShutdownBound = 3;
// Drained, but N completions could not be written: kExitUnwrittenBase + min(N, 99).
inline constexpr int kExitUnwrittenBase = 10;
inline constexpr int kExitUnwrittenCap = 99;

int run_daemon(const std::string& config_path);
int run_migrate(const std::string& config_path);
// `for_use`: the subcommand whose rules apply besides the file's own (ConfigUse).
int run_check_config(const std::string& config_path, ConfigUse for_use);
int run_enqueue(const std::string& config_path, const EnqueueRequest& request);
int run_stats(const std::string& config_path, bool json);
int run_retry(const std::string& config_path, std::int64_t id);
int run_cancel(const std::string& config_path, std::int64_t id,
               const std::optional<std::string>& reason);
int run_pause(const std::string& config_path, const std::string& queue);
int run_resume(const std::string& config_path, const std::string& queue);
// Lists every schedule with its last and next tick; with next_count > 0, prints the next
// ticks of schedule `name` after `from` (now when empty).
int run_schedules(const std::string& config_path, int next_count, const std::string& name,
                  const std::string& from);

// `pgjobd ui`: the dashboard alone on ui.listen, no workers; SIGHUP reloads its users.
int run_ui(const std::string& config_path);
// `pgjobd ui-passwd`: prints a yescrypt hash of a password read from the terminal (twice,
// not echoed) or, with password_stdin, from the first line of stdin.
int run_ui_passwd(bool password_stdin);
// The dashboard of `config.ui` over the configured database, serving until destroyed.
// Throws when the store or the listener cannot be made.
std::unique_ptr<ui::UiServer> start_dashboard(const Config& config);

struct BenchOptions;
// config_given: -c was on the command line (else a missing default file is fine).
int run_bench_command(const std::string& config_path, bool config_given, BenchOptions options,
                      bool json);

// The whole command line: parses argv with CLI11 and dispatches.
int cli_main(int argc, char** argv);

}  // namespace pgjobd
