#pragma once
// Moves bytes between the daemon and a running child: payload in, the head of stdout and
// the tail of stderr kept.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "handlers/child_process.hpp"
#include "handlers/tail_buffer.hpp"
#include "text/head_buffer.hpp"

namespace pgjobd {

class ChildIo {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Wake { kChildExited, kDeadline, kStopRequested };

  // `payload` must outlive this object. stdin is closed once the payload is written (at
  // once when it is empty), or as soon as the child closes its end. stdout is read to the
  // end, its first `stdout_head_bytes` kept.
  ChildIo(ChildPipes pipes, std::string_view payload, std::size_t stdout_head_bytes,
          std::size_t stderr_tail_bytes);

  // Writes the payload and reads stdout/stderr, all without blocking on any one stream,
  // until the child exits, `deadline` passes (if set) or `stop_fd` (if ≥ 0) is readable.
  // It never waits for EOF: a grandchild may hold the pipes open long after the child exits.
  Wake pump_until(const ChildProcess& child, std::optional<Clock::time_point> deadline,
                  int stop_fd);

  // Reads what the pipes hold right now (after the child exited), without waiting.
  void drain();

  HeadBuffer& stdout_head() { return stdout_head_; }
  const TailBuffer& stderr_tail() const { return stderr_tail_; }

 private:
  void write_payload();
  // Reads one chunk of stdout or stderr into its buffer; closes `fd` on EOF or error.
  // Returns false when nothing more is readable now.
  bool read_chunk(UniqueFd& fd);

  ChildPipes pipes_;
  std::string_view unwritten_payload_;
  HeadBuffer stdout_head_;
  TailBuffer stderr_tail_;
  std::vector<char> read_buffer_;
};

}  // namespace pgjobd
