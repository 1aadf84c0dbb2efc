// Log formatting (text and JSON lines with structured fields) and password masking.

#include "log/logging.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "log/log_fields.hpp"
#include "log/secrets.hpp"

namespace pgjobd {
namespace {

TEST(MaskPassword, HidesUrlPasswords) {
  EXPECT_EQ(mask_password("postgresql://app:s3cret@db.example:5432/jobs"),
            "postgresql://app:***@db.example:5432/jobs");
  EXPECT_EQ(mask_password("postgres://app:p%40ss:w@host/db?sslmode=require"),
            "postgres://app:***@host/db?sslmode=require");
}

TEST(MaskPassword, LeavesUrlsWithoutPasswordAlone) {
  EXPECT_EQ(mask_password("postgresql://app@host/db"), "postgresql://app@host/db");
  EXPECT_EQ(mask_password("postgresql://host:5432/db"), "postgresql://host:5432/db");
}

TEST(MaskPassword, HidesQueryAndKeyValuePasswords) {
  EXPECT_EQ(mask_password("postgresql://host/db?user=a&password=secret&sslmode=disable"),
            "postgresql://host/db?user=a&password=***&sslmode=disable");
  EXPECT_EQ(mask_password("host=db user=app password=secret dbname=jobs"),
            "host=db user=app password=*** dbname=jobs");
  EXPECT_EQ(mask_password("host=db password = 'a b\\' c' dbname=jobs"),
            "host=db password = *** dbname=jobs");
}

// Captures what the configured formatter writes.
class CapturedLog {
 public:
  explicit CapturedLog(const std::string& format) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    sink->set_formatter(make_log_formatter(format));
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return stream_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_ = spdlog::default_logger();
  std::ostringstream stream_;
};

TEST(Logging, JsonLinesCarryStructuredFields) {
  CapturedLog log("json");
  {
    ScopedLogFields fields{{"job_id", std::int64_t{42}}, {"type", "mail"}, {"attempt", 2}};
    fields.add({"error", "exit 3: \"quoted\"\nnext line"});
    spdlog::warn("job {} failed", 42);
  }
  spdlog::info("after the scope");
  std::istringstream lines(log.text());
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  const auto a = nlohmann::json::parse(first);
  EXPECT_EQ(a["level"], "warn");  // as log.level spells it
  EXPECT_EQ(a["msg"], "job 42 failed");
  EXPECT_EQ(a["job_id"], 42);
  EXPECT_EQ(a["type"], "mail");
  EXPECT_EQ(a["attempt"], 2);
  EXPECT_EQ(a["error"], "exit 3: \"quoted\"\nnext line");
  EXPECT_TRUE(a.contains("ts"));
  const auto b = nlohmann::json::parse(second);
  EXPECT_EQ(b["msg"], "after the scope");
  EXPECT_FALSE(b.contains("job_id"));  // fields end with their scope
}

TEST(Logging, TextLinesUseLogfmtFields) {
  CapturedLog log("text");
  {
    ScopedLogFields fields{{"job_id", std::int64_t{7}}, {"error", "two words"}};
    spdlog::warn("job failed");
  }
  const std::string line = log.text();
  EXPECT_NE(line.find(" warn  job failed job_id=7 error=\"two words\"\n"), std::string::npos)
      << line;
}

// A message or field carrying a newline (an error's output, a job type name) must not
// start a line of its own that looks like another record.
constexpr const char* kForged = "\nFAKE 2026-01-01 [info] forged";

std::size_t line_count(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST(Logging, TextMessagesEscapeControlCharacters) {
  CapturedLog log("text");
  spdlog::error("handler said:{}", kForged);
  const std::string text = log.text();
  EXPECT_EQ(line_count(text), 1U) << text;
  EXPECT_NE(text.find("handler said:\\nFAKE 2026-01-01 [info] forged\n"), std::string::npos)
      << text;
}

TEST(Logging, TextFieldsEscapeControlCharacters) {
  CapturedLog log("text");
  {
    ScopedLogFields fields{{"type", std::string("mail") + kForged},
                           {"error",
                            "a\x01"
                            "b\x7f\tc\rd"}};
    spdlog::warn("job failed");
  }
  const std::string text = log.text();
  EXPECT_EQ(line_count(text), 1U) << text;
  EXPECT_NE(text.find(" type=\"mail\\nFAKE 2026-01-01 [info] forged\""), std::string::npos) << text;
  EXPECT_NE(text.find(" error=\"a\\x01b\\x7f\\tc\\rd\"\n"), std::string::npos) << text;
}

TEST(Logging, TextKeepsValidUtf8AndRepairsInvalid) {
  CapturedLog log("text");
  {
    ScopedLogFields fields{{"type", "caf\xc3\xa9"}};
    spdlog::info("gr\xc3\xbc\xc3\x9f \xff");
  }
  const std::string text = log.text();
  EXPECT_NE(text.find("gr\xc3\xbc\xc3\x9f \xef\xbf\xbd type=caf\xc3\xa9\n"), std::string::npos)
      << text;
}

TEST(Logging, JsonStaysValidWithForgedLines) {
  CapturedLog log("json");
  {
    ScopedLogFields fields{{"type", std::string("mail") + kForged}};
    spdlog::error("handler said:{}\x01", kForged);
  }
  const std::string text = log.text();
  ASSERT_EQ(line_count(text), 1U) << text;
  const auto record = nlohmann::json::parse(text);
  EXPECT_EQ(record["msg"], std::string("handler said:") + kForged + "\x01");
  EXPECT_EQ(record["type"], std::string("mail") + kForged);
}

// Found by tests/fuzz/log_line_fuzz: a double field was formatted into 32 bytes, so a huge
// value was cut to a wrong number, and NaN or infinity made the JSON line invalid.
TEST(Logging, JsonDoubleFieldsStayValidAndExact) {
  CapturedLog log("json");
  {
    ScopedLogFields fields{{"big", 1e300},
                           {"nan", std::numeric_limits<double>::quiet_NaN()},
                           {"neg_inf", -std::numeric_limits<double>::infinity()},
                           {"ms", 12.3456}};
    spdlog::info("doubles");
  }
  const auto record = nlohmann::json::parse(log.text());
  EXPECT_EQ(record["big"], 1e300);
  EXPECT_EQ(record["nan"], "nan");
  EXPECT_EQ(record["neg_inf"], "-inf");
  EXPECT_EQ(record["ms"], 12.346);
}

}  // namespace
}  // namespace pgjobd

namespace pgjobd {
namespace {

// The formatters are the last stop before stderr: a known secret in a message or a field
// (an error text, say) leaves as ***, in both formats.
TEST(Logging, FormattersScrubProcessSecrets) {
  add_process_secrets({"Formatter-Secret-9"});
  for (const std::string format : {"text", "json"}) {
    CapturedLog log(format);
    {
      ScopedLogFields fields{{"error", "auth failed for Formatter-Secret-9"}};
      spdlog::error("cannot connect: password Formatter-Secret-9 rejected");
    }
    const std::string text = log.text();
    EXPECT_EQ(text.find("Formatter-Secret-9"), std::string::npos) << text;
    EXPECT_NE(text.find("password *** rejected"), std::string::npos) << text;
    EXPECT_NE(text.find("auth failed for ***"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace pgjobd
