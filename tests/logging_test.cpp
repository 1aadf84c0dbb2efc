// Log formatting (text and JSON lines with structured fields) and password masking.

#include "log/logging.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "log/log_fields.hpp"

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
  EXPECT_EQ(a["level"], "warning");
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
  EXPECT_NE(line.find(" warning job failed job_id=7 error=\"two words\"\n"), std::string::npos)
      << line;
}

}  // namespace
}  // namespace pgjobd
