// Escaping and formatting for the dashboard's pages.
#include "ui/html.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "text/percent.hpp"
#include "text/utf8.hpp"

namespace pgjobd::ui {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      const std::size_t length = read_utf8_character(text, i).length;
      if (length == 0) {
        out += kReplacement;
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '\n':
      case '\t':
      case '\r':
        out += c;
        break;
      default:
        if (u < 0x20 || u == 0x7F) {
          out += kReplacement;
        } else {
          out += c;
        }
    }
    ++i;
  }
  return out;
}

std::string format_thousands(std::int64_t value) {
  const bool negative = value < 0;
  // Through unsigned so that INT64_MIN has a magnitude too.
  std::uint64_t magnitude =
      negative ? ~static_cast<std::uint64_t>(value) + 1 : static_cast<std::uint64_t>(value);
  std::string digits = std::to_string(magnitude);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

std::string format_count(const BoundedCount& count) {
  return format_thousands(count.value) + (count.at_least ? "+" : "");
}

std::string format_age(double seconds) {
  if (!(seconds > 0)) return "0s";  // NaN too
  const auto total = static_cast<std::int64_t>(std::llround(std::min(seconds, 1e15)));
  const std::int64_t days = total / 86400, hours = total % 86400 / 3600,
                     minutes = total % 3600 / 60, secs = total % 60;
  if (days > 0) return format_thousands(days) + "d " + std::to_string(hours) + "h";
  if (hours > 0) return std::to_string(hours) + "h " + std::to_string(minutes) + "m";
  if (minutes > 0) return std::to_string(minutes) + "m " + std::to_string(secs) + "s";
  return std::to_string(secs) + "s";
}

std::string url_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x80 && std::isalnum(u) != 0) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    }
  }
  return out;
}

std::string url_decode(std::string_view text) {
  std::string plus_as_space(text);
  std::replace(plus_as_space.begin(), plus_as_space.end(), '+', ' ');
  return percent_decode(plus_as_space);
}

std::map<std::string, std::vector<std::string>> parse_form(std::string_view text) {
  std::map<std::string, std::vector<std::string>> fields;
  while (!text.empty()) {
    const std::size_t amp = text.find('&');
    std::string_view pair = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    std::string name = url_decode(pair.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : url_decode(pair.substr(eq + 1));
    fields[name].push_back(std::move(value));
  }
  return fields;
}

PrettyJson pretty_json(std::string_view json, std::size_t max_bytes, int max_indent) {
  PrettyJson out;
  int depth = 0;
  // A line break and indentation, except inside levels deeper than max_indent: those are
  // written compactly, as PostgreSQL's text has them.
  const auto newline = [&](int level) {
    if (level > max_indent) {
      out.flattened = true;
      return;
    }
    out.text += '\n';
    out.text.append(static_cast<std::size_t>(std::max(depth, 0)) * 4, ' ');
  };
  const auto next_token = [&](std::size_t from) {
    while (from < json.size() && std::isspace(static_cast<unsigned char>(json[from])) != 0) ++from;
    return from;
  };
  for (std::size_t i = 0; i < json.size(); ++i) {
    if (out.text.size() >= max_bytes) {
      out.cut = next_token(i) < json.size();
      return out;
    }
    const char c = json[i];
    switch (c) {
      case '"': {
        // The whole string, escapes and all (cut at max_bytes for one huge string).
        std::size_t end = i + 1;
        while (end < json.size() && json[end] != '"') end += json[end] == '\\' ? 2 : 1;
        end = std::min(end + 1, json.size());
        const std::size_t room = max_bytes - out.text.size();
        if (end - i > room) {
          out.text.append(json.substr(i, utf8_cut(json.substr(i), room)));
          out.cut = true;
          return out;
        }
        out.text.append(json.substr(i, end - i));
        i = end - 1;
        break;
      }
      case '{':
      case '[': {
        const std::size_t after = next_token(i + 1);
        if (after < json.size() && json[after] == (c == '{' ? '}' : ']')) {
          out.text += c == '{' ? "{}" : "[]";
          i = after;
          break;
        }
        out.text += c;
        ++depth;
        newline(depth);
        break;
      }
      case '}':
      case ']':
        --depth;
        newline(depth + 1);
        out.text += c;
        break;
      case ',':
        out.text += ',';
        newline(depth);
        break;
      case ':':
        out.text += ": ";
        break;
      default:
        if (std::isspace(static_cast<unsigned char>(c)) == 0) out.text += c;
    }
  }
  return out;
}

}  // namespace pgjobd::ui
