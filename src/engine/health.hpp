#pragma once
// Readiness as the engine's parts see it: each part reports a problem (or none) under its
// own name; the daemon is ready when no part has one. Backs /readyz.

#include <map>
#include <mutex>
#include <string>

namespace pgjobd {

class Health {
 public:
  void set_problem(const std::string& part, std::string problem) {
    std::lock_guard lock(mutex_);
    if (problem.empty()) {
      problems_.erase(part);
    } else {
      problems_[part] = std::move(problem);
    }
  }
  void clear(const std::string& part) { set_problem(part, {}); }

  // Empty when ready; else "part: problem; part: problem".
  std::string problems() const {
    std::lock_guard lock(mutex_);
    std::string text;
    for (const auto& [part, problem] : problems_) {
      if (!text.empty()) text += "; ";
      text += part;
      text += ": ";
      text += problem;
    }
    return text;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::string> problems_;
};

}  // namespace pgjobd
