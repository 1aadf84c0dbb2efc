// Thread-local storage behind ScopedLogFields.

#include "log/log_fields.hpp"

#include <cstdio>

namespace pgjobd {
namespace {
thread_local std::vector<LogField> t_fields;
}

const std::vector<LogField>& current_log_fields() { return t_fields; }

ScopedLogFields::Init::Init(const char* k, double v) : field{k, {}, true} {
  char buf[32];
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
