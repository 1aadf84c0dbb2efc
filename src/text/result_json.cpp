// jobs.result's text: JSON checked against what jsonb accepts, strings made storable, and
// the bound of worker.max_result_bytes.

#include "text/result_json.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "text/escape.hpp"
#include "text/utf8.hpp"

namespace pgjobd {
namespace {

constexpr std::size_t kMaxDepth = 1000;
constexpr std::size_t kMaxNumberChars = 1000;
constexpr int kMaxExponent = 1000;

// Walks the JSON without building it, refusing what jsonb would fail on (see storable_json).
// The completion would otherwise fail on the value: the completer drops such a row (its job
// then runs again after its lease), the sql handler's transaction would end the job dead.
class StorableCheck final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool /*value*/) override { return true; }
  bool number_integer(number_integer_t /*value*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*value*/) override { return true; }
  bool number_float(number_float_t /*value*/, const string_t& text) override {
    if (text.size() > kMaxNumberChars) return false;
    const auto e = text.find_first_of("eE");
    if (e == string_t::npos) return true;
    std::size_t digits = e + 1;
    if (digits < text.size() && (text[digits] == '+' || text[digits] == '-')) ++digits;
    int exponent = 0;
    const auto [end, error] =
        std::from_chars(text.data() + digits, text.data() + text.size(), exponent);
    return error == std::errc() && end == text.data() + text.size() && exponent <= kMaxExponent;
  }
  bool string(string_t& value) override { return value.find('\0') == string_t::npos; }
  bool binary(binary_t& /*value*/) override { return false; }
  bool start_object(std::size_t /*elements*/) override { return ++depth_ <= kMaxDepth; }
  bool key(string_t& value) override { return string(value); }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t /*elements*/) override { return ++depth_ <= kMaxDepth; }
  bool end_array() override { return --depth_, true; }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  std::size_t depth_ = 0;
};

}  // namespace

bool storable_json(std::string_view text) {
  StorableCheck check;
  return nlohmann::json::sax_parse(text.begin(), text.end(), &check);
}

std::string json_string(std::string_view text) {
  std::string valid = valid_utf8(text);
  std::erase(valid, '\0');
  std::string out;
  out.reserve(valid.size() + 2);
  append_json_string(out, valid);
  return out;
}

std::string stored_result(std::string_view value, ResultFormat format, std::size_t whole_bytes,
                          std::size_t max_bytes) {
  const std::size_t bytes = std::max(whole_bytes, value.size());
  if (max_bytes == 0 || bytes == 0) return {};
  if (bytes > max_bytes) {
    const std::string_view head = value.substr(0, utf8_cut(value, max_bytes));
    return R"({"truncated": true, "bytes": )" + std::to_string(bytes) + R"(, "head": )" +
           json_string(head) + "}";
  }
  if (format == ResultFormat::kJson && storable_json(value)) return std::string(value);
  return json_string(value);
}

}  // namespace pgjobd
