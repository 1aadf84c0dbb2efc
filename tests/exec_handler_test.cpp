// Tests for the exec handler: exit statuses, stdin/env plumbing, bounded stderr, timeouts,
// stop requests, process-group cleanup and reaping. Real /bin/sh children, no database.

#include "handlers/exec_handler.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "handlers/tail_buffer.hpp"
#include "support/wait_until.hpp"

namespace pgjobd {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::size_t kExecResultBytes = 65536;  // worker.max_result_bytes's default

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

pid_t read_pid(const std::filesystem::path& path) {
  return static_cast<pid_t>(std::stol(read_file(path)));
}

// Dead means no such process, or a zombie waiting for init to reap it (in containers the
// init process may reap late or never; a zombie runs no code and holds no pipe).
bool process_is_dead(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close_paren = line.rfind(')');
  return close_paren != std::string::npos && line.size() > close_paren + 2 &&
         line[close_paren + 2] == 'Z';
}

bool wait_until_dead(pid_t pid, std::chrono::milliseconds patience) {
  const auto give_up = Clock::now() + patience;
  while (!process_is_dead(pid)) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Restores a signal's disposition when the test ends, even on a failed assertion.
class ScopedSignalDisposition {
 public:
  ScopedSignalDisposition(int signal, void (*handler)(int)) : signal_(signal) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    sigaction(signal_, &action, &saved_);
  }
  ~ScopedSignalDisposition() { sigaction(signal_, &saved_, nullptr); }

 private:
  int signal_;
  struct sigaction saved_ {};
};

// Blocks signals in the calling thread, as the daemon does, until the test ends.
class ScopedBlockedSignals {
 public:
  explicit ScopedBlockedSignals(std::initializer_list<int> signals) {
    sigset_t set;
    sigemptyset(&set);
    for (const int signal : signals) sigaddset(&set, signal);
    pthread_sigmask(SIG_BLOCK, &set, &saved_);
  }
  ~ScopedBlockedSignals() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

 private:
  sigset_t saved_;
};

class ExecHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "pgjobd-exec-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }

  void TearDown() override {
    // Every child the handler started must have been reaped: no zombie, no stray child.
    int status = 0;
    errno = 0;
    EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path file(const std::string& name) const { return dir_ / name; }

  static HandlerConfig shell_config(const std::string& script) {
    HandlerConfig config;
    config.kind = HandlerConfig::Kind::kExec;
    config.exec_argv = {"/bin/sh", "-c", script};
    return config;
  }

  static Job make_job(std::string payload = "{}") {
    Job job;
    job.id = 42;
    job.queue = "mail";
    job.type = "send_email";
    job.attempt = 3;
    job.payload = std::move(payload);
    return job;
  }

  static JobResult run(const HandlerConfig& config, const Job& job = make_job(),
                       std::stop_token stop = {}) {
    return make_exec_handler(config, {}, kExecResultBytes)(job, std::move(stop));
  }

  std::filesystem::path dir_;
};

TEST(OutcomeTest, NamesEveryOutcome) {
  EXPECT_STREQ(to_string(Outcome::kDone), "done");
  EXPECT_STREQ(to_string(Outcome::kRetry), "retry");
  EXPECT_STREQ(to_string(Outcome::kDead), "dead");
  EXPECT_STREQ(to_string(Outcome::kReleased), "released");
}

TEST(TailBufferTest, KeepsOnlyTheLastBytes) {
  TailBuffer tail(5);
  tail.append("abc");
  EXPECT_EQ(tail.bytes(), "abc");
  EXPECT_FALSE(tail.truncated());
  tail.append("defg");
  EXPECT_EQ(tail.bytes(), "cdefg");
  EXPECT_TRUE(tail.truncated());
  tail.append("0123456789");
  EXPECT_EQ(tail.bytes(), "56789");
}

TEST_F(ExecHandlerTest, ExitZeroIsDone) {
  const JobResult result = run(shell_config("exit 0"));
  EXPECT_EQ(result.outcome, Outcome::kDone);
  EXPECT_EQ(result.error, "");
}

TEST_F(ExecHandlerTest, OtherExitRetriesWithStatusAndStderr) {
  const JobResult result = run(shell_config("echo 'smtp refused' >&2; exit 3"));
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "exit 3: smtp refused");
}

TEST_F(ExecHandlerTest, PermanentExitCodeIsDead) {
  HandlerConfig config = shell_config("echo 'bad address' >&2; exit 65");
  config.permanent_exit_codes = {64, 65};
  JobResult result = run(config);
  EXPECT_EQ(result.outcome, Outcome::kDead);
  EXPECT_EQ(result.error, "exit 65: bad address");

  config.exec_argv[2] = "exit 66";
  result = run(config);
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "exit 66");
}

TEST_F(ExecHandlerTest, PayloadArrivesOnStdinExactly) {
  const std::string payload = "{\"to\": \"zoë@example.com\",\n \"quote\": \"it's \\\"fine\\\"\"}";
  const JobResult result =
      run(shell_config("cat > '" + file("in").string() + "'"), make_job(payload));
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_EQ(read_file(file("in")), payload);
}

TEST_F(ExecHandlerTest, LargePayloadWhileChildFloodsStdoutAndStderrFirst) {
  // The child writes megabytes before it reads stdin: a handler that wrote the payload
  // before reading the output (or the other way round) would deadlock here.
  std::string payload(5 * 1024 * 1024, 'p');
  for (std::size_t i = 0; i < payload.size(); i += 1000)
    payload[i] = static_cast<char>('a' + i % 26);
  const auto start = Clock::now();
  const JobResult result =
      run(shell_config("head -c 3000000 /dev/zero; head -c 3000000 /dev/zero >&2; cat > '" +
                       file("in").string() + "'"),
          make_job(payload));
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error.substr(0, 200);
  EXPECT_LT(seconds_since(start), 20);
  EXPECT_TRUE(read_file(file("in")) == payload);
}

TEST_F(ExecHandlerTest, ChildThatNeverReadsStdinNeitherBlocksNorRaisesSigpipe) {
  // With SIGPIPE at its default action, a write to the closed pipe would kill this binary.
  const ScopedSignalDisposition default_sigpipe(SIGPIPE, SIG_DFL);
  const std::string payload(5 * 1024 * 1024, 'x');
  const auto start = Clock::now();
  JobResult result = run(shell_config("sleep 0.2; exit 0"), make_job(payload));
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error;
  result = run(shell_config("exit 7"), make_job(payload));
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "exit 7");
  EXPECT_LT(seconds_since(start), 5);
}

TEST_F(ExecHandlerTest, LotsOfStdoutDoesNotHang) {
  const auto start = Clock::now();
  const JobResult result = run(shell_config("head -c 20000000 /dev/zero; exit 0"));
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_LT(seconds_since(start), 20);
}

TEST_F(ExecHandlerTest, EnvironmentCarriesTheJobIdentity) {
  ASSERT_EQ(::setenv("PGJOBD_JOB_ID", "stale", 1), 0);
  ASSERT_EQ(::setenv("PGJOBD_TEST_INHERITED", "yes", 1), 0);
  ASSERT_EQ(::setenv("PGJOBD_DATABASE_URL", "postgresql://daemon:secret@db/jobs", 1), 0);
  ASSERT_EQ(::setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1), 0);
  const JobResult result = run(shell_config("env > '" + file("env").string() + "'"));
  ::unsetenv("PGJOBD_JOB_ID");
  ::unsetenv("PGJOBD_TEST_INHERITED");
  ::unsetenv("PGJOBD_DATABASE_URL");
  ::unsetenv("NOTIFY_SOCKET");
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;

  std::multimap<std::string, std::string> seen;
  std::istringstream lines(read_file(file("env")));
  for (std::string line; std::getline(lines, line);) {
    const auto equals = line.find('=');
    if (equals != std::string::npos) seen.emplace(line.substr(0, equals), line.substr(equals + 1));
  }
  const std::map<std::string, std::string> expected = {{"PGJOBD_JOB_ID", "42"},
                                                       {"PGJOBD_JOB_TYPE", "send_email"},
                                                       {"PGJOBD_JOB_QUEUE", "mail"},
                                                       {"PGJOBD_JOB_ATTEMPT", "3"},
                                                       {"PGJOBD_TEST_INHERITED", "yes"}};
  for (const auto& [name, value] : expected) {
    ASSERT_EQ(seen.count(name), 1U) << name;
    EXPECT_EQ(seen.find(name)->second, value) << name;
  }
  // The daemon's own credentials and systemd channel are withheld.
  EXPECT_EQ(seen.count("PGJOBD_DATABASE_URL"), 0U);
  EXPECT_EQ(seen.count("NOTIFY_SOCKET"), 0U);
}

TEST_F(ExecHandlerTest, ChildNeverSeesTheDaemonsDatabaseUrl) {
  const std::string url = "postgresql://daemon:Child-Must-Not-See@db/jobs";
  ASSERT_EQ(::setenv("DATABASE_URL", url.c_str(), 1), 0);
  const WithheldCredentials withheld = credentials_to_withhold(url, environ);
  const JobResult result = make_exec_handler(shell_config("env > '" + file("env").string() + "'"),
                                             withheld, kExecResultBytes)(make_job(), {});
  ::unsetenv("DATABASE_URL");
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  const std::string env = read_file(file("env"));
  EXPECT_NE(env.find("PGJOBD_JOB_ID=42"), std::string::npos);
  EXPECT_EQ(env.find("Child-Must-Not-See"), std::string::npos) << env;
}

TEST_F(ExecHandlerTest, StderrTailIsBoundedAndEndsWithTheLastLine) {
  const JobResult result =
      run(shell_config("yes 'some noise on stderr' | head -c 1000000 >&2; echo >&2; echo 'the last "
                       "line' >&2; exit 1"));
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_LE(result.error.size(), 4200U);
  EXPECT_GE(result.error.size(), 4000U);
  EXPECT_EQ(result.error.rfind("exit 1: ...", 0), 0U) << result.error.substr(0, 40);
  EXPECT_TRUE(result.error.ends_with("\nthe last line"))
      << result.error.substr(result.error.size() - 60);
}

TEST_F(ExecHandlerTest, StderrTailDropsNulBytesAndTrailingWhitespace) {
  const JobResult result = run(shell_config("printf 'bad\\000input\\n\\n  \\n' >&2; exit 2"));
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "exit 2: badinput");
}

TEST_F(ExecHandlerTest, TimeoutTermsTheGroupAndRetries) {
  HandlerConfig config =
      shell_config("echo $$ > '" + file("pid").string() + "'; sleep 30 & echo $! > '" +
                   file("sleeper").string() + "'; echo 'working...' >&2; wait");
  config.timeout = 200ms;
  const auto start = Clock::now();
  const JobResult result = run(config);
  const double elapsed = seconds_since(start);
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "timed out after 200ms; stderr: working...");
  EXPECT_GE(elapsed, 0.19);
  EXPECT_LT(elapsed, 5);
  // The direct child was reaped, so its pid is free at once.
  const pid_t pid = read_pid(file("pid"));
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(wait_until_dead(read_pid(file("sleeper")), 2s));
}

TEST_F(ExecHandlerTest, TermIgnoringChildIsKilledAfterTheGrace) {
  HandlerConfig config =
      shell_config("trap '' TERM; echo $$ > '" + file("pid").string() + "'; sleep 30");
  config.timeout = 200ms;
  config.kill_grace = 300ms;
  const auto start = Clock::now();
  const JobResult result = run(config);
  const double elapsed = seconds_since(start);
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "timed out after 200ms");
  EXPECT_GE(elapsed, 0.49);  // waited the whole grace before SIGKILL
  EXPECT_LT(elapsed, 5);
  errno = 0;
  EXPECT_EQ(::kill(read_pid(file("pid")), 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(ExecHandlerTest, GrandchildDoesNotOutliveTheJob) {
  // The grandchild holds stdout and stderr open: waiting for EOF would hang for 1000 s.
  const auto start = Clock::now();
  const JobResult result =
      run(shell_config("sleep 1000 & echo $! > '" + file("grandchild").string() + "'; exit 0"));
  EXPECT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_LT(seconds_since(start), 5);
  EXPECT_TRUE(wait_until_dead(read_pid(file("grandchild")), 2s));
}

TEST_F(ExecHandlerTest, StopRequestReleasesPromptly) {
  HandlerConfig config = shell_config("echo $$ > '" + file("pid").string() + "'; sleep 30");
  config.kill_grace = 10s;
  std::stop_source stop;
  const auto start = Clock::now();
  std::jthread stopper([&stop, this] {
    // Once the child runs: it has written its pid.
    testing::wait_until([this] { return !read_file(file("pid")).empty(); }, 10s);
    stop.request_stop();
  });
  const JobResult result = run(config, make_job(), stop.get_token());
  const double elapsed = seconds_since(start);
  EXPECT_EQ(result.outcome, Outcome::kReleased);
  EXPECT_LT(elapsed, 3);
  errno = 0;
  EXPECT_EQ(::kill(read_pid(file("pid")), 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(ExecHandlerTest, StopAlreadyRequestedStartsNothing) {
  std::stop_source stop;
  stop.request_stop();
  const JobResult result =
      run(shell_config("touch '" + file("ran").string() + "'"), make_job(), stop.get_token());
  EXPECT_EQ(result.outcome, Outcome::kReleased);
  EXPECT_FALSE(std::filesystem::exists(file("ran")));
}

TEST_F(ExecHandlerTest, DeathBySignalRetriesNamingTheSignal) {
  const JobResult result = run(shell_config("echo 'about to crash' >&2; kill -SEGV $$"));
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "killed by signal 11 (SIGSEGV): about to crash");
}

TEST_F(ExecHandlerTest, MissingProgramIsDead) {
  HandlerConfig config;
  config.kind = HandlerConfig::Kind::kExec;
  config.exec_argv = {"/nonexistent/pgjobd-test-program", "--flag"};
  const JobResult result = run(config);
  EXPECT_EQ(result.outcome, Outcome::kDead);
  EXPECT_EQ(result.error, "cannot run /nonexistent/pgjobd-test-program: No such file or directory");
}

TEST_F(ExecHandlerTest, NonExecutableProgramIsDead) {
  const std::filesystem::path program = file("not-executable.sh");
  std::ofstream(program) << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(::chmod(program.c_str(), 0644), 0);
  HandlerConfig config;
  config.kind = HandlerConfig::Kind::kExec;
  config.exec_argv = {program.string()};
  const JobResult result = run(config);
  EXPECT_EQ(result.outcome, Outcome::kDead);
  EXPECT_EQ(result.error, "cannot run " + program.string() + ": Permission denied");
}

TEST_F(ExecHandlerTest, ProgramWithoutSlashIsFoundOnPath) {
  HandlerConfig config;
  config.kind = HandlerConfig::Kind::kExec;
  config.exec_argv = {"true"};
  EXPECT_EQ(run(config).outcome, Outcome::kDone);
}

TEST_F(ExecHandlerTest, BlockedSigtermInTheDaemonThreadStillStopsTheChild) {
  // The daemon blocks SIGTERM in every thread; a child inheriting that mask would sit out
  // the whole 10 s grace and die only by SIGKILL.
  const ScopedBlockedSignals daemon_mask({SIGTERM, SIGINT, SIGHUP});
  // exec: dash unblocks signals in the children it forks, so only an exec'd program keeps
  // exactly the mask we spawned the shell with.
  HandlerConfig config = shell_config("exec sleep 30");
  config.timeout = 200ms;
  config.kill_grace = 10s;
  const auto start = Clock::now();
  const JobResult result = run(config);
  EXPECT_EQ(result.outcome, Outcome::kRetry);
  EXPECT_EQ(result.error, "timed out after 200ms");
  EXPECT_LT(seconds_since(start), 3);
}

TEST_F(ExecHandlerTest, ChildStartsWithEmptyMaskAndDefaultDispositions) {
  const ScopedBlockedSignals daemon_mask({SIGTERM, SIGINT, SIGHUP});
  const ScopedSignalDisposition ignored_pipe(SIGPIPE, SIG_IGN);
  const ScopedSignalDisposition ignored_quit(SIGQUIT, SIG_IGN);
  // exec, so the status read is that of a process that got exactly what we spawned with.
  const JobResult result = run(shell_config("exec grep -E '^Sig(Blk|Ign):' /proc/self/status > '" +
                                            file("status").string() + "'"));
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  std::map<std::string, unsigned long long> masks;
  std::istringstream lines(read_file(file("status")));
  for (std::string name, hex; lines >> name >> hex;) masks[name] = std::stoull(hex, nullptr, 16);
  ASSERT_EQ(masks.count("SigBlk:"), 1U);
  EXPECT_EQ(masks["SigBlk:"], 0U);
  for (const int signal : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT}) {
    EXPECT_EQ(masks["SigIgn:"] & (1ULL << (signal - 1)), 0U) << "signal " << signal;
  }
}

TEST_F(ExecHandlerTest, ChildLeadsItsOwnProcessGroup) {
  const JobResult result =
      run(shell_config("ps -o pid= -o pgid= -p $$ > '" + file("ids").string() + "' || exit 9"));
  if (result.outcome == Outcome::kRetry && result.error.starts_with("exit 9")) {
    GTEST_SKIP() << "ps is not available";
  }
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  std::istringstream ids(read_file(file("ids")));
  pid_t pid = 0;
  pid_t group = 0;
  ids >> pid >> group;
  EXPECT_NE(pid, 0);
  EXPECT_EQ(pid, group);
  EXPECT_NE(group, ::getpgrp());
}

TEST_F(ExecHandlerTest, ConcurrentJobsDoNotHoldEachOthersPipes) {
  // If one job's child inherited another job's stdin write end, `cat` there would never see
  // EOF and that job would hang until its timeout.
  constexpr int kJobs = 8;
  std::vector<JobResult> results(kJobs);
  const auto start = Clock::now();
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < kJobs; ++i) {
      workers.emplace_back([this, i, &results] {
        HandlerConfig config = shell_config("cat > '" + file("in" + std::to_string(i)).string() +
                                            "'; sleep 0." + std::to_string(i));
        config.timeout = 10s;
        results[i] = run(config, make_job("payload " + std::to_string(i)));
      });
    }
  }
  EXPECT_LT(seconds_since(start), 5);
  for (int i = 0; i < kJobs; ++i) {
    EXPECT_EQ(results[i].outcome, Outcome::kDone) << i << ": " << results[i].error;
    EXPECT_EQ(read_file(file("in" + std::to_string(i))), "payload " + std::to_string(i));
  }
}

TEST(ExecHandlerConfigTest, EmptyArgvIsRejectedWhenBuilding) {
  HandlerConfig config;
  config.kind = HandlerConfig::Kind::kExec;
  EXPECT_THROW(make_exec_handler(config, {}, kExecResultBytes), std::invalid_argument);
}

// stdout is the result of a done job; the job runner reads it as JSON or else as text.
TEST_F(ExecHandlerTest, ResultIsStdoutOfADoneJob) {
  const JobResult result = run(shell_config(R"(printf '{"sent": 2}')"));
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_EQ(result.result, R"({"sent": 2})");
  EXPECT_EQ(result.result_format, ResultFormat::kJson);
  EXPECT_EQ(result.result_bytes, result.result.size());
}

TEST_F(ExecHandlerTest, NoOutputIsNoResult) {
  const JobResult result = run(shell_config("exit 0"));
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_EQ(result.result, "");
  EXPECT_EQ(result.result_bytes, 0u);
}

// A child printing 10 MB: all of it is read (the child never blocks on a full pipe), one
// byte over the bound kept, the whole size counted, and the job done.
TEST_F(ExecHandlerTest, TenMegabytesOfStdoutKeepTheBoundPlusOneAndTheirSize) {
  const JobResult result = run(shell_config("head -c 10485760 /dev/zero | tr '\\0' x"));
  ASSERT_EQ(result.outcome, Outcome::kDone) << result.error;
  EXPECT_EQ(result.result.size(), kExecResultBytes + 1);
  EXPECT_EQ(result.result_bytes, 10485760u);
}

}  // namespace
}  // namespace pgjobd
