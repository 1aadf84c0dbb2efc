// The poll loop that feeds a child its payload and collects its output without deadlocking.

#include "handlers/child_io.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <system_error>

namespace pgjobd {
namespace {

constexpr std::size_t kReadChunkBytes = 64 * 1024;
// Without a pidfd, how often to check whether the child has exited.
constexpr std::chrono::milliseconds kExitCheckTick{10};
// drain() stops after this much even if a dying grandchild is still writing.
constexpr std::size_t kMaxDrainBytes = 1024 * 1024;

// A write to a pipe whose reader is gone raises SIGPIPE, whose default action ends the
// whole daemon. The daemon ignores SIGPIPE, but this code must not depend on that: it
// blocks SIGPIPE in this thread around the write and discards the one the write raised.
class SigpipeSuppressor {
 public:
  SigpipeSuppressor() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &saved_mask_);
  }
  ~SigpipeSuppressor() { pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr); }
  SigpipeSuppressor(const SigpipeSuppressor&) = delete;
  SigpipeSuppressor& operator=(const SigpipeSuppressor&) = delete;

  // Call after a write failed with EPIPE. A SIGPIPE pending from before is not ours to eat.
  void discard_raised_sigpipe() {
    if (was_pending_) return;
    const timespec no_wait{};
    while (sigtimedwait(&sigpipe_, nullptr, &no_wait) < 0 && errno == EINTR) {
    }
  }

 private:
  sigset_t sigpipe_;
  sigset_t saved_mask_;
  bool was_pending_ = false;
};

int poll_timeout_ms(std::optional<ChildIo::Clock::time_point> deadline, bool has_exit_fd) {
  std::optional<std::chrono::milliseconds> timeout;
  if (deadline) {
    const auto remaining =
        std::chrono::ceil<std::chrono::milliseconds>(*deadline - ChildIo::Clock::now());
    timeout = std::max(remaining, std::chrono::milliseconds::zero());
  }
  if (!has_exit_fd) timeout = timeout ? std::min(*timeout, kExitCheckTick) : kExitCheckTick;
  if (!timeout) return -1;
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(timeout->count(), INT_MAX));
}

}  // namespace

ChildIo::ChildIo(ChildPipes pipes, std::string_view payload, std::size_t stdout_head_bytes,
                 std::size_t stderr_tail_bytes)
    : pipes_(std::move(pipes)),
      unwritten_payload_(payload),
      stdout_head_(stdout_head_bytes),
      stderr_tail_(stderr_tail_bytes),
      read_buffer_(kReadChunkBytes) {
  if (unwritten_payload_.empty()) pipes_.stdin_write.reset();
}

ChildIo::Wake ChildIo::pump_until(const ChildProcess& child,
                                  std::optional<Clock::time_point> deadline, int stop_fd) {
  enum Slot { kStdin, kStdout, kStderr, kExit, kStop, kSlots };
  for (;;) {
    if (child.has_exited()) return Wake::kChildExited;
    if (deadline && Clock::now() >= *deadline) return Wake::kDeadline;

    // A closed stream gets fd -1, which poll() skips.
    pollfd fds[kSlots] = {
        {pipes_.stdin_write.get(), POLLOUT, 0},
        {pipes_.stdout_read.get(), POLLIN, 0},
        {pipes_.stderr_read.get(), POLLIN, 0},
        {child.exit_fd(), POLLIN, 0},
        {stop_fd, POLLIN, 0},
    };
    if (::poll(fds, kSlots, poll_timeout_ms(deadline, child.exit_fd() >= 0)) < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if (fds[kStdin].revents != 0) write_payload();
    if (fds[kStdout].revents != 0) read_chunk(pipes_.stdout_read);
    if (fds[kStderr].revents != 0) read_chunk(pipes_.stderr_read);
    if (fds[kStop].revents != 0) return Wake::kStopRequested;
    // kExit needs no handling: has_exited() at the top of the loop sees the exit.
  }
}

void ChildIo::drain() {
  for (UniqueFd* fd : {&pipes_.stdout_read, &pipes_.stderr_read}) {
    for (std::size_t chunks = 0; chunks * kReadChunkBytes < kMaxDrainBytes; ++chunks) {
      if (!read_chunk(*fd)) break;
    }
  }
  pipes_.stdin_write.reset();
}

void ChildIo::write_payload() {
  if (!pipes_.stdin_write.valid()) return;
  ssize_t written = 0;
  int write_error = 0;
  {
    SigpipeSuppressor suppressor;
    written =
        ::write(pipes_.stdin_write.get(), unwritten_payload_.data(), unwritten_payload_.size());
    write_error = errno;
    if (written < 0 && write_error == EPIPE) suppressor.discard_raised_sigpipe();
  }
  if (written < 0) {
    if (write_error == EAGAIN || write_error == EINTR) return;
    // EPIPE: the child closed stdin or exited without reading it all. That is the child's
    // business (its exit status tells how it went); other errors end the stream the same way.
    pipes_.stdin_write.reset();
    return;
  }
  unwritten_payload_.remove_prefix(static_cast<std::size_t>(written));
  if (unwritten_payload_.empty()) pipes_.stdin_write.reset();  // EOF tells the child it has all
}

bool ChildIo::read_chunk(UniqueFd& fd) {
  if (!fd.valid()) return false;
  const ssize_t got = ::read(fd.get(), read_buffer_.data(), read_buffer_.size());
  if (got > 0) {
    const std::string_view chunk(read_buffer_.data(), static_cast<std::size_t>(got));
    if (&fd == &pipes_.stderr_read) {
      stderr_tail_.append(chunk);
    } else {
      stdout_head_.append(chunk);
    }
    return true;
  }
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  fd.reset();  // EOF, or an error no retry would fix
  return false;
}

}  // namespace pgjobd
