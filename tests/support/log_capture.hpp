#pragma once
// Captures what the engine logs through spdlog's default logger, for tests that check a
// log line. spdlog swaps its default logger without synchronising with threads that are
// logging, so create a capture before the threads under test start and destroy it after
// they are joined.

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace pgjobd::testing {

class LogCapture {
 public:
  LogCapture()
      : previous_(spdlog::default_logger()),
        sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000)) {
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_level(spdlog::level::info);
    logger->set_pattern("%l %v");
    spdlog::set_default_logger(std::move(logger));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Whether a captured line ("<level> <message>") contains `text`.
  bool contains(const std::string& text) const {
    for (const auto& line : sink_->last_formatted()) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  // How many captured lines contain `text`.
  int count(const std::string& text) const {
    int n = 0;
    for (const auto& line : sink_->last_formatted()) n += line.find(text) != std::string::npos;
    return n;
  }
  std::string all() const {
    std::string text;
    for (const auto& line : sink_->last_formatted()) text += line;
    return text;
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace pgjobd::testing
