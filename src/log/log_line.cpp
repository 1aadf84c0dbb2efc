// Formats one log record as a text or JSON line. A record's message and fields can carry a
// handler's raw output, so whatever bytes they hold, a record stays one well-formed line.
#include "log/log_line.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "text/escape.hpp"
#include "text/utf8.hpp"

namespace pgjobd {
namespace {

// Messages and fields can carry a handler's raw bytes; a JSON line must be UTF-8.
void append_json_text(std::string& out, std::string_view raw) {
  append_json_string(out, valid_utf8(raw));
}

// Text lines: one record is one line, whatever a message or field carries (an error's
// output, a job type name). \n \r \t are written as those escapes, other C0 bytes and DEL
// as \xNN; invalid UTF-8 becomes U+FFFD and valid UTF-8 is kept as is. Backslashes in a
// message stay as they are (paths read better); inside a quoted field they are escaped.
void append_text_escaped(std::string& out, std::string_view raw, bool quoted) {
  const std::string text = valid_utf8(raw);
  if (!quoted) {
    out += escape_control_characters(text);
    return;
  }
  // Quotes and backslashes first: the control escapes that follow add backslashes of their
  // own, which must stay single.
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  out += escape_control_characters(escaped);
}

bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

// logfmt: bare when simple, else double-quoted with escapes, so fields stay parseable.
void append_logfmt_value(std::string& out, std::string_view value) {
  const bool bare = !value.empty() && value.find_first_of(" \"=\\") == std::string_view::npos &&
                    std::none_of(value.begin(), value.end(), is_control);
  if (bare) {
    append_text_escaped(out, value, false);  // still repairs invalid UTF-8
  } else {
    out += '"';
    append_text_escaped(out, value, true);
    out += '"';
  }
}

std::string iso_timestamp(std::chrono::system_clock::time_point tp) {
  const auto since_epoch = tp.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - secs);
  std::time_t t = secs.count();
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];  // generous: GCC cannot prove the fields stay 2 digits
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis.count()));
  return buf;
}

}  // namespace

std::string format_json_line(const LogRecord& record) {
  std::string line = R"({"ts":")" + iso_timestamp(record.time) + R"(","level":)";
  append_json_text(line, record.level);
  line += ",\"msg\":";
  append_json_text(line, record.message);
  for (const LogField& field : record.fields) {
    line += ',';
    append_json_text(line, field.key);
    line += ':';
    if (field.numeric) {
      line += field.value;
    } else {
      append_json_text(line, field.value);
    }
  }
  line += "}\n";
  return line;
}

std::string format_text_line(const LogRecord& record) {
  std::string line = iso_timestamp(record.time);
  line[10] = ' ';
  line.pop_back();  // the Z: terminals read local-looking times, but this is UTC
  line += ' ';
  line += record.level;
  line.append(record.level.size() < 5 ? 6 - record.level.size() : 1, ' ');
  append_text_escaped(line, record.message, false);
  for (const LogField& field : record.fields) {
    line += ' ';
    append_text_escaped(line, field.key, false);
    line += '=';
    append_logfmt_value(line, field.value);
  }
  line += '\n';
  return line;
}

}  // namespace pgjobd
