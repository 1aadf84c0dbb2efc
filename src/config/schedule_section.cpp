// Reads the `schedules:` section: one entry per schedule, its payload as JSON text. The
// rules (cron text, time zone, ranges) are checked in config_rules.cpp.
#include <regex>
#include <string>

#include "config/config_stages.hpp"
#include "config/yaml_section.hpp"
#include "text/escape.hpp"

namespace pgjobd::config_detail {
namespace {

// Deeper payloads are refused rather than risk the stack on a hostile file.
constexpr int kMaxPayloadDepth = 64;

// A plain (unquoted) scalar as YAML 1.2's core schema reads it: null, a boolean, a number,
// else a string. Quoted scalars are always strings.
void append_scalar(const YAML::Node& node, std::string& out) {
  const std::string& text = node.Scalar();
  if (node.Tag() != "?") {
    append_json_string(out, text);
    return;
  }
  static const std::regex kNumber(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    out += "null";
  } else if (text == "true" || text == "True" || text == "TRUE") {
    out += "true";
  } else if (text == "false" || text == "False" || text == "FALSE") {
    out += "false";
  } else if (std::regex_match(text, kNumber)) {
    out += text;
  } else {
    append_json_string(out, text);
  }
}

// False when the node is too deep.
bool append_json(const YAML::Node& node, int depth, std::string& out) {
  if (depth > kMaxPayloadDepth) return false;
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      out += '{';
      bool first = true;
      for (const auto& item : node) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, item.first.IsScalar() ? item.first.Scalar() : "");
        out += ':';
        if (!append_json(item.second, depth + 1, out)) return false;
      }
      out += '}';
      return true;
    }
    case YAML::NodeType::Sequence: {
      out += '[';
      bool first = true;
      for (const auto& item : node) {
        if (!first) out += ',';
        first = false;
        if (!append_json(item, depth + 1, out)) return false;
      }
      out += ']';
      return true;
    }
    case YAML::NodeType::Scalar:
      append_scalar(node, out);
      return true;
    default:
      out += "null";
      return true;
  }
}

void read_payload(YamlSection& schedule, std::string& out) {
  const YamlSection::Entry* entry = schedule.find("payload");
  if (entry == nullptr) return;
  std::string json;
  if (!append_json(entry->value, 0, json)) {
    schedule.diag().add(entry->key_line, schedule.path_of("payload"),
                        "nested deeper than " + std::to_string(kMaxPayloadDepth) + " levels");
    return;
  }
  schedule.diag().note_line(schedule.path_of("payload"), entry->key_line);
  out = json;
}

}  // namespace

void read_schedules(YamlSection& schedules, std::string_view /*key: NAME*/, Config& config) {
  for (const YamlSection::Entry& entry : schedules.entries()) {
    YamlSection section(entry.value, schedules.path_of(entry.key), entry.key_line,
                        schedules.diag());
    ScheduleConfig& schedule = config.schedules[entry.key];
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
