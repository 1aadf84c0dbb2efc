// Reads the `schedules:` section: one entry per schedule, its payload as JSON text. The
// rules (cron text, time zone, ranges) are checked in config_rules.cpp.
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstddef>
#include <limits>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <tuple>

#include "config/config_stages.hpp"
#include "config/yaml_section.hpp"
#include "text/utf8.hpp"

namespace pgjobd::config_detail {
namespace {

// Keys in the file's order: the payload reads as it was written.
using Json = nlohmann::ordered_json;

// Deeper payloads are refused rather than risk the stack on a hostile file.
constexpr int kMaxPayloadDepth = 64;

// A decimal number's value, for comparing two spellings of it: sign, significant digits
// and the power of ten of the last one ("-1.5e3" and "-1500.0" both give -, "15", 2);
// nullopt for a nonzero number with an exponent far beyond any double's.
std::optional<std::tuple<bool, std::string, long long>> decimal_value(std::string_view number) {
  const bool negative = !number.empty() && number[0] == '-';
  std::string digits;
  long long exponent = 0;
  std::size_t i = negative ? 1 : 0;
  bool fraction = false;
  for (; i < number.size() && number[i] != 'e' && number[i] != 'E'; ++i) {
    if (number[i] == '.') {
      fraction = true;
    } else {
      digits += number[i];
      if (fraction) --exponent;
    }
  }
  digits.erase(0, digits.find_first_not_of('0'));
  if (digits.empty()) return std::tuple{false, std::string(), 0LL};  // zero, whatever its sign
  while (digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  if (i < number.size()) {
    std::string_view written = number.substr(i + 1);
    if (!written.empty() && written[0] == '+') written.remove_prefix(1);
    long long power = 0;
    const auto [end, error] =
        std::from_chars(written.data(), written.data() + written.size(), power);
    // Far beyond any double (whose exponents stay within ±400), and no overflow below.
    constexpr long long kFar = std::numeric_limits<long long>::max() / 2;
    if (error != std::errc() || end != written.data() + written.size() || power > kFar ||
        power < -kFar) {
      return std::nullopt;
    }
    exponent += power;
  }
  return std::tuple{negative, digits, exponent};
}

// A plain (unquoted) scalar as YAML 1.2's core schema reads it: null, a boolean, a number,
// else a string. Quoted scalars are always strings. Invalid UTF-8 in a string becomes
// U+FFFD (JSON text is UTF-8). Returns the problem, or "" when there is none.
std::string scalar_to_json(const YAML::Node& node, Json& out) {
  const std::string& text = node.Scalar();
  if (node.Tag() != "?") {
    out = valid_utf8(text);
    return {};
  }
  static const std::regex kNumber(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    out = nullptr;
  } else if (text == "true" || text == "True" || text == "TRUE") {
    out = true;
  } else if (text == "false" || text == "False" || text == "FALSE") {
    out = false;
  } else if (std::regex_match(text, kNumber)) {
    // Read as JSON reads it: a 64-bit integer exactly, else a double, written back in its
    // shortest form ("-1.5e3" becomes -1500.0). A number a double cannot hold (too many
    // digits, or beyond its range) is refused rather than silently changed.
    out = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (out.is_discarded() || decimal_value(out.dump()) != decimal_value(text)) {
      return "number " + text + " cannot be kept exactly in JSON (a 64-bit integer or a " +
             "double); quote it to keep it as a string";
    }
  } else {
    out = valid_utf8(text);
  }
  return {};
}

// The JSON value of `node`; returns the problem, or "" when there is none.
std::string to_json(const YAML::Node& node, int depth, Json& out) {
  if (depth > kMaxPayloadDepth) {
    return "nested deeper than " + std::to_string(kMaxPayloadDepth) + " levels";
  }
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out = Json::object();
      for (const auto& item : node) {
        // A repeated key keeps its last value, as jsonb does (in its first place).
        Json& value = out[valid_utf8(item.first.IsScalar() ? item.first.Scalar() : "")];
        if (std::string problem = to_json(item.second, depth + 1, value); !problem.empty()) {
          return problem;
        }
      }
      return {};
    case YAML::NodeType::Sequence:
      out = Json::array();
      for (const auto& item : node) {
        if (std::string problem = to_json(item, depth + 1, out.emplace_back()); !problem.empty()) {
          return problem;
        }
      }
      return {};
    case YAML::NodeType::Scalar:
      return scalar_to_json(node, out);
    default:
      out = nullptr;
      return {};
  }
}

void read_payload(YamlSection& schedule, std::string& out) {
  const YamlSection::Entry* entry = schedule.find("payload");
  if (entry == nullptr) return;
  Json json;
  if (std::string problem = to_json(entry->value, 0, json); !problem.empty()) {
    schedule.diag().add(entry->key_line, schedule.path_of("payload"), problem);
    return;
  }
  schedule.diag().note_line(schedule.path_of("payload"), entry->key_line);
  out = json.dump();
}

}  // namespace

void read_schedules(YamlSection& schedules, std::string_view /*key: NAME*/, Config& config) {
  if (!schedules.present()) return;  // no section: the table's YAML schedules stay as they are
  config.schedules.emplace();
  for (const YamlSection::Entry& entry : schedules.entries()) {
    YamlSection section(entry.value, schedules.path_of(entry.key), entry.key_line,
                        schedules.diag());
    ScheduleConfig& schedule = (*config.schedules)[entry.key];
    section.read("cron", schedule.cron);
    section.read("every", schedule.every);
    section.read("timezone", schedule.timezone);
    section.read("type", schedule.type);
    section.read("queue", schedule.queue);
    section.read("priority", schedule.priority);
    section.read("max_attempts", schedule.max_attempts);
    read_payload(section, schedule.payload);
    section.read("enabled", schedule.enabled);
    section.read("overlap", schedule.overlap);
    section.read("misfire", schedule.misfire);
    section.read("misfire_grace", schedule.misfire_grace);
    section.report_unknown_keys();
  }
}

}  // namespace pgjobd::config_detail
