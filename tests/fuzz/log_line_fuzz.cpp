// Fuzzes the log line formatters with records whose message and fields carry any bytes, as
// a handler's output can. Text: one line, no raw control characters, valid UTF-8. JSON: one
// line that parses and gives back the message and fields (invalid UTF-8 replaced).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "log/log_fields.hpp"
#include "log/log_line.hpp"
#include "text/utf8.hpp"

namespace {

using pgjobd::LogField;
using pgjobd::LogRecord;
using pgjobd::ScopedLogFields;
using pgjobd::valid_utf8;

// The level names the daemon writes (log.level's spelling) and the field keys it writes:
// realistic records, while arbitrary keys still get their turn.
constexpr std::array<const char*, 7> kLevels{"trace", "debug",    "info", "warn",
                                             "error", "critical", "off"};
constexpr std::array<const char*, 7> kKeys{"job_id", "type",        "queue", "attempt",
                                           "error",  "duration_ms", "worker"};

bool is_control(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte < 0x20 || byte == 0x7f;
}

// A field as the daemon builds them: ScopedLogFields::Init from text, an integer or a double.
struct FuzzField {
  LogField field;
  enum class Kind { kText, kInteger, kDouble } kind;
  std::int64_t integer = 0;
  double real = 0;
};

FuzzField make_field(FuzzedDataProvider& in) {
  const std::string key = in.ConsumeBool()
                              ? kKeys[in.ConsumeIntegralInRange<std::size_t>(0, kKeys.size() - 1)]
                              : in.ConsumeRandomLengthString(16);
  switch (in.ConsumeIntegralInRange(0, 2)) {
    case 0: {
      const auto value = in.ConsumeIntegral<std::int64_t>();
      return {ScopedLogFields::Init(key.c_str(), value).field, FuzzField::Kind::kInteger, value};
    }
    case 1: {
      const auto value = in.ConsumeFloatingPoint<double>();
      return {ScopedLogFields::Init(key.c_str(), value).field, FuzzField::Kind::kDouble, 0, value};
    }
    default:
      return {ScopedLogFields::Init(key.c_str(), in.ConsumeRandomLengthString(256)).field,
              FuzzField::Kind::kText};
  }
}

void check_text(const LogRecord& record) {
  const std::string line = pgjobd::format_text_line(record);
  FUZZ_CHECK(!line.empty() && line.back() == '\n');
  // No newline, carriage return or other control byte but the terminator: one record can
  // never look like two, nor move a terminal's cursor.
  FUZZ_CHECK(std::none_of(line.begin(), line.end() - 1, is_control));
  FUZZ_CHECK(valid_utf8(line) == line);
  // A message with nothing to escape or repair is written as it is.
  const std::string message(record.message);
  if (valid_utf8(message) == message && std::none_of(message.begin(), message.end(), is_control)) {
    FUZZ_CHECK(line.find(message) != std::string::npos);
  }
}

bool is_timestamp(const std::string& ts) {  // 2026-11-29T08:00:00.123Z
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (ts.size() != kShape.size()) return false;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const bool ok = kShape[i] == 'd' ? ts[i] >= '0' && ts[i] <= '9' : ts[i] == kShape[i];
    if (!ok) return false;
  }
  return true;
}

void check_json(const LogRecord& record, const std::vector<FuzzField>& fields) {
  const std::string line = pgjobd::format_json_line(record);
  FUZZ_CHECK(line.size() >= 2 && line.back() == '\n');
  FUZZ_CHECK(std::count(line.begin(), line.end(), '\n') == 1);
  const auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!json.is_discarded() && json.is_object());

  // A key written more than once (or shadowing ts, level, msg) keeps only one value, so
  // only unique keys are compared.
  std::vector<std::string> keys{"ts", "level", "msg"};
  for (const FuzzField& f : fields) keys.push_back(valid_utf8(f.field.key));
  const auto unique = [&](const std::string& key) {
    return std::count(keys.begin(), keys.end(), key) == 1;
  };
  if (unique("ts")) FUZZ_CHECK(json["ts"].is_string() && is_timestamp(json["ts"]));
  if (unique("level")) FUZZ_CHECK(json["level"] == std::string(record.level));
  if (unique("msg")) FUZZ_CHECK(json["msg"] == valid_utf8(record.message));
  for (const FuzzField& f : fields) {
    const std::string key = valid_utf8(f.field.key);
    if (!unique(key)) continue;
    const nlohmann::json& value = json[key];
    switch (f.kind) {
      case FuzzField::Kind::kText:
        FUZZ_CHECK(value == valid_utf8(f.field.value));
        break;
      case FuzzField::Kind::kInteger:
        FUZZ_CHECK(value.is_number_integer() && value.get<std::int64_t>() == f.integer);
        break;
      case FuzzField::Kind::kDouble:
        if (std::isfinite(f.real)) {  // written with 3 decimals, however large
          FUZZ_CHECK(value.is_number());
          const double error = std::abs(value.get<double>() - f.real);
          FUZZ_CHECK(error <= 0.0005 + std::abs(f.real) * 1e-15);
        } else {  // JSON has no NaN or infinity
          FUZZ_CHECK(value.is_string());
        }
        break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  // Any time system_clock (nanoseconds since 1970 in an int64) holds from 1970 on.
  const auto time = std::chrono::system_clock::time_point(std::chrono::nanoseconds(
      in.ConsumeIntegralInRange<std::int64_t>(0, std::numeric_limits<std::int64_t>::max())));
  const std::string level = kLevels[in.ConsumeIntegralInRange<std::size_t>(0, kLevels.size() - 1)];
  std::vector<FuzzField> fields(in.ConsumeIntegralInRange(0, 6));
  for (FuzzField& f : fields) f = make_field(in);
  const std::string message = in.ConsumeRemainingBytesAsString();

  std::vector<LogField> log_fields;
  for (const FuzzField& f : fields) log_fields.push_back(f.field);
  const LogRecord record{time, level, message, log_fields};
  check_text(record);
  check_json(record, fields);
  return 0;
}
