// Reads one YAML map of known keys into typed values, reporting every problem with its line.
#include "config/yaml_section.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "text/escape.hpp"
#include "text/utf8.hpp"

namespace pgjobd::config_detail {
namespace {

// How a node is named in "expected X, got Y" messages.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return single_quoted(node.Scalar());
    default:
      return "no value";
  }
}

// Each decode() returns what is wrong with `node`, or "" after storing its value in `out`.

std::string decode(const YAML::Node& node, std::string& out) {
  if (!node.IsScalar()) return "expected a string, got " + describe(node);
  // Raw bytes that are not UTF-8, or yaml-cpp's reading of the escapes \N, \_, \L and \P
  // (one byte each, not the character's UTF-8): no database, log or page could take them.
  if (valid_utf8(node.Scalar()) != node.Scalar()) {
    return "not valid UTF-8 text (write the character itself: YAML's \\N, \\_, \\L and \\P "
           "escapes are not supported)";
  }
  out = node.Scalar();
  return {};
}

// Decimal only: yaml-cpp's own conversion would read "010" as octal 8.
std::string decode(const YAML::Node& node, int& out) {
  std::string problem = "expected a whole number, got " + describe(node);
  if (!node.IsScalar()) return problem;
  const std::string& text = node.Scalar();
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::invalid_argument || end != text.data() + text.size()) return problem;
  if (error == std::errc::result_out_of_range) return "number " + text + " is too large";
  out = value;
  return {};
}

// yaml-cpp's conversion accepts true/false, yes/no, on/off, y/n.
std::string decode(const YAML::Node& node, bool& out) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    return "expected true or false, got " + describe(node);
  }
  out = value;
  return {};
}

std::string decode(const YAML::Node& node, double& out) {
  std::string problem = "expected a number, got " + describe(node);
  if (!node.IsScalar()) return problem;
  const std::string& text = node.Scalar();
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  // from_chars also reads "inf" and "nan", which no setting wants.
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return problem;
  }
  out = value;
  return {};
}

std::string decode(const YAML::Node& node, Millis& out) {
  if (!node.IsScalar()) return "expected a duration such as 5s, got " + describe(node);
  try {
    out = parse_duration(node.Scalar());
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

std::string join(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) joined += (joined.empty() ? "" : ", ") + word;
  return joined;
}

}  // namespace

int line_of(const YAML::Node& node, int fallback) {
  if (node.IsNull() || node.Mark().line < 0) return fallback;
  return node.Mark().line + 1;
}

YamlSection::YamlSection(const YAML::Node& node, std::string path, int line, Diagnostics& diag)
    : path_(std::move(path)), line_(line), present_(node.IsDefined()), diag_(&diag) {
  if (!present_) return;
  diag.note_line(path_, line_);
  if (node.IsNull()) {
    is_map_ = true;
    return;
  }
  if (!node.IsMap()) {
    diag.add(line_, path_,
             path_.empty()
                 ? "the top level must be a map of sections (database, worker, ...), got " +
                       describe(node)
                 : "expected a map of keys, got " + describe(node));
    return;
  }
  is_map_ = true;
  for (auto it = node.begin(); it != node.end(); ++it) {
    int key_line = it->first.Mark().line + 1;
    if (!it->first.IsScalar()) {
      diag.add(key_line, path_, "keys must be plain words, got " + describe(it->first));
      continue;
    }
    Entry entry{it->first.Scalar(), key_line, it->second};
    // yaml-cpp keeps both copies of a repeated key; silently using either would hide a typo.
    auto first = std::find_if(entries_.begin(), entries_.end(),
                              [&](const Entry& e) { return e.key == entry.key; });
    if (first != entries_.end()) {
      diag.add(key_line, path_of(entry.key),
               "duplicate key (first written on line " + std::to_string(first->key_line) + ")");
      continue;
    }
    entries_.push_back(std::move(entry));
  }
}

std::string YamlSection::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const YamlSection::Entry* YamlSection::find(std::string_view key) {
  if (std::find(allowed_.begin(), allowed_.end(), key) == allowed_.end()) {
    allowed_.emplace_back(key);
  }
  for (const Entry& entry : entries_) {
    if (entry.key == key) {
      diag_->note_line(path_of(key), line_of(entry.value, entry.key_line));
      return &entry;
    }
  }
  return nullptr;
}

const std::vector<YamlSection::Entry>& YamlSection::entries() {
  all_allowed_ = true;
  return entries_;
}

template <typename T>
void YamlSection::read_scalar(std::string_view key, T& out) {
  const Entry* entry = find(key);
  if (entry == nullptr) return;
  std::string problem = decode(entry->value, out);
  if (!problem.empty()) diag_->add(line_of(entry->value, entry->key_line), path_of(key), problem);
}

template <typename T>
void YamlSection::read_list(std::string_view key, std::vector<T>& out) {
  const Entry* entry = find(key);
  if (entry == nullptr) return;
  int line = line_of(entry->value, entry->key_line);
  if (!entry->value.IsSequence()) {
    diag_->add(line, path_of(key), "expected a list such as [a, b], got " + describe(entry->value));
    return;
  }
  std::vector<T> values;
  std::size_t i = 0;
  for (const YAML::Node& item : entry->value) {
    std::string item_path = path_of(key) + "[" + std::to_string(i) + "]";
    int item_line = line_of(item, line);
    diag_->note_line(item_path, item_line);
    T value{};
    std::string problem = decode(item, value);
    if (!problem.empty()) diag_->add(item_line, item_path, problem);
    values.push_back(std::move(value));
    ++i;
  }
  out = std::move(values);
}

void YamlSection::read(std::string_view key, std::string& out) { read_scalar(key, out); }
void YamlSection::read(std::string_view key, int& out) { read_scalar(key, out); }
void YamlSection::read(std::string_view key, bool& out) { read_scalar(key, out); }
void YamlSection::read(std::string_view key, double& out) { read_scalar(key, out); }
void YamlSection::read(std::string_view key, Millis& out) { read_scalar(key, out); }
void YamlSection::read(std::string_view key, std::vector<std::string>& out) { read_list(key, out); }
void YamlSection::read(std::string_view key, std::vector<int>& out) { read_list(key, out); }

YamlSection YamlSection::section(std::string_view key) {
  const Entry* entry = find(key);
  if (entry == nullptr)
    return YamlSection(YAML::Node(YAML::NodeType::Undefined), path_of(key), 0, *diag_);
  // The key's line: a block map's first entry is on the line after it.
  return YamlSection(entry->value, path_of(key), entry->key_line, *diag_);
}

void YamlSection::report_unknown_keys() {
  if (all_allowed_) return;
  for (const Entry& entry : entries_) {
    if (std::find(allowed_.begin(), allowed_.end(), entry.key) != allowed_.end()) continue;
    std::string guess = closest_match(entry.key, allowed_);
    diag_->add(entry.key_line, path_of(entry.key),
               guess.empty() ? "unknown key (expected one of: " + join(allowed_) + ")"
                             : "unknown key (did you mean '" + guess + "'?)");
  }
}

}  // namespace pgjobd::config_detail
