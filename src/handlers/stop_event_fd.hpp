#pragma once
// Turns a std::stop_token into a file descriptor that poll() can wait on.

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <stop_token>
#include <system_error>

#include "handlers/unique_fd.hpp"

namespace pgjobd {

// fd() becomes readable once stop is requested (at once if it already was), so a poll loop
// reacts immediately instead of checking the token on a timer.
class StopEventFd {
 public:
  explicit StopEventFd(std::stop_token stop)
      : event_(create_event()), on_stop_(std::move(stop), NotifyEvent{event_.get()}) {}
  StopEventFd(const StopEventFd&) = delete;
  StopEventFd& operator=(const StopEventFd&) = delete;

  int fd() const { return event_.get(); }

 private:
  // Runs on whichever thread requests stop; an eventfd write is thread-safe and cannot block.
  struct NotifyEvent {
    int fd;
    void operator()() const noexcept {
      const std::uint64_t one = 1;
      [[maybe_unused]] const ssize_t ignored = ::write(fd, &one, sizeof one);
    }
  };

  static UniqueFd create_event() {
    const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    return UniqueFd(fd);
  }

  // Declared before the callback: destroyed after it is deregistered, so the callback never
  // writes to a closed (or reused) descriptor.
  UniqueFd event_;
  std::stop_callback<NotifyEvent> on_stop_;
};

}  // namespace pgjobd
