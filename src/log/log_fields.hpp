#pragma once
// Structured fields attached to the log lines of the current thread, e.g. the job a
// worker is running. The formatters in logging.cpp print them as key=value (text) or as
// JSON members; a scope object removes them again.

#include <cstdint>
#include <string>
#include <vector>

namespace pgjobd {

struct LogField {
  std::string key;
  std::string value;
  bool numeric = false;  // printed unquoted in JSON
};

const std::vector<LogField>& current_log_fields();

// Adds fields for its lifetime:  ScopedLogFields fields{{"job_id", 12}, {"type", "mail"}};
class ScopedLogFields {
 public:
  struct Init {
    Init(const char* k, std::string v) : field{k, std::move(v), false} {}
    Init(const char* k, const char* v) : field{k, v, false} {}
    Init(const char* k, std::int64_t v) : field{k, std::to_string(v), true} {}
    Init(const char* k, int v) : field{k, std::to_string(v), true} {}
    Init(const char* k, double v);  // 3 decimals; NaN and infinities as text ("nan")
    LogField field;
  };
  ScopedLogFields(std::initializer_list<Init> fields);
  ~ScopedLogFields();
  ScopedLogFields(const ScopedLogFields&) = delete;
  ScopedLogFields& operator=(const ScopedLogFields&) = delete;

  // Adds a field until this scope ends (e.g. duration_ms once a job finished).
  void add(Init field);

 private:
  std::size_t count_ = 0;
};

}  // namespace pgjobd
