// Reads the `limits:` section (README "Limits"). The rate is parsed here, where its line
// is known; the other rules are checked in config_rules.cpp.
#include <charconv>
#include <string>

#include "config/config_stages.hpp"
#include "config/yaml_section.hpp"

namespace pgjobd::config_detail {

double parse_limit_rate(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0) return 0;
  std::string_view number = text.substr(0, slash);
  std::string_view unit = text.substr(slash + 1);
  double count = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), count);
  if (error != std::errc() || end != number.data() + number.size() || !(count > 0)) return 0;
  double seconds = 0;
  if (unit == "s") {
    seconds = 1;
  } else if (unit == "m") {
    seconds = 60;
  } else if (unit == "h") {
    seconds = 3600;
  } else {
    return 0;
  }
  return count / seconds;
}

void read_limits(YamlSection& limits, std::string_view /*key: NAME*/, Config& config) {
  if (!limits.present()) return;  // no section: this daemon applies the database's limits
  config.limits.emplace();
  for (const YamlSection::Entry& entry : limits.entries()) {
    YamlSection section(entry.value, limits.path_of(entry.key), entry.key_line, limits.diag());
    LimitConfig& limit = (*config.limits)[entry.key];
    section.read("types", limit.types);
    section.read("queues", limit.queues);
    section.read("key", limit.key);
    section.read("concurrency", limit.concurrency);
    section.read("burst", limit.burst);
    if (const YamlSection::Entry* rate = section.find("rate"); rate != nullptr) {
      section.read("rate", limit.rate);
      limit.rate_per_second = parse_limit_rate(limit.rate);
      if (limit.rate_per_second <= 0 || limit.rate_per_second > 1e6) {
        section.diag().add(rate->key_line, section.path_of("rate"),
                           "bad rate '" + limit.rate +
                               "' (use starts per second, minute or hour: 10/s, 60/m, 100/h; "
                               "at most 1000000/s)");
      }
    }
    section.report_unknown_keys();
  }
}

}  // namespace pgjobd::config_detail
