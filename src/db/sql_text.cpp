// Quoting and literal encoding for SQL identifiers and array parameters.

#include "db/sql_text.hpp"

#include "text/utf8.hpp"

namespace pgjobd {

std::string quote_identifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

namespace {

// {a,b,c}: `write` appends each element's text to the literal.
template <typename T, typename Write>
std::string array_literal(const std::vector<T>& values, Write write) {
  std::string out = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    write(out, values[i]);
  }
  out += '}';
  return out;
}

}  // namespace

namespace {

void append_quoted_element(std::string& out, const std::string& value) {
  out += '"';
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

std::string text_array_literal(const std::vector<std::string>& values) {
  return array_literal(values, append_quoted_element);
}

std::string nullable_array_literal(const std::vector<std::string>& values) {
  return array_literal(values, [](std::string& out, const std::string& value) {
    if (value.empty()) {
      out += "NULL";
    } else {
      append_quoted_element(out, value);
    }
  });
}

std::string int_array_literal(const std::vector<std::int64_t>& values) {
  return array_literal(values,
                       [](std::string& out, std::int64_t value) { out += std::to_string(value); });
}

std::string sanitize_text(std::string_view text) {
  std::string without_nul;
  without_nul.reserve(text.size());
  for (char c : text) {
    if (c != '\0') without_nul += c;
  }
  return valid_utf8(without_nul);
}

void replace_all(std::string& text, std::string_view placeholder, std::string_view value) {
  for (auto pos = text.find(placeholder); pos != std::string::npos;
       pos = text.find(placeholder, pos + value.size())) {
    text.replace(pos, placeholder.size(), value);
  }
}

}  // namespace pgjobd
