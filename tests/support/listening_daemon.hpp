#pragma once
// A fixture for the end-to-end tests of the daemon's two HTTP listeners: a daemon serving
// /metrics and the dashboard on free loopback ports, with a noop handler for type "ping".

#include <gtest/gtest.h>

#include <optional>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {

class ListeningDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonYaml yaml(schema_.name());
    yaml.set("metrics", "{listen: \"127.0.0.1:0\"}")
        .set("ui", "{listen: \"127.0.0.1:0\"}")
        .handler("ping", "{builtin: noop}");
    daemon_.emplace(yaml.text());
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
    metrics_ = daemon_->metrics_port();
    dashboard_ = daemon_->dashboard_port();
    ASSERT_GT(metrics_, 0) << daemon_->log();
    ASSERT_GT(dashboard_, 0) << daemon_->log();
  }

  TestSchema schema_;
  std::optional<DaemonProcess> daemon_;
  int metrics_ = 0;
  int dashboard_ = 0;
};

}  // namespace pgjobd::testing
