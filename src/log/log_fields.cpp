// Thread-local storage behind ScopedLogFields.

#include "log/log_fields.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

namespace pgjobd {
namespace {
thread_local std::vector<LogField> t_fields;
}

const std::vector<LogField>& current_log_fields() { return t_fields; }

ScopedLogFields::Init::Init(const char* k, double v) : field{k, {}, std::isfinite(v)} {
  if (!field.numeric) {  // JSON has no NaN or infinity: a string keeps the line valid
    field.value = std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
    return;
  }
  // Room for the largest double's 309 integer digits: a buffer sized for typical values
  // would cut a huge one short, and log 1e300 as a 31-digit number.
  char buf[std::numeric_limits<double>::max_exponent10 + 16];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  field.value = buf;
}

ScopedLogFields::ScopedLogFields(std::initializer_list<Init> fields) {
  for (const Init& init : fields) add(init);
}

void ScopedLogFields::add(Init init) {
  t_fields.push_back(std::move(init.field));
  ++count_;
}

ScopedLogFields::~ScopedLogFields() { t_fields.resize(t_fields.size() - count_); }

}  // namespace pgjobd
