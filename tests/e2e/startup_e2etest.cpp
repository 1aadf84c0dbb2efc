// End-to-end: what the daemon loads at start. libcurl (and the nine libraries only it
// needs) is loaded when an http handler is made, not by every daemon: 2.5-3 ms of a first
// claim's 53 on a small VM (src/handlers/curl_library.hpp).

#include <gtest/gtest.h>

#include <string>

#include "support/daemon_process.hpp"
#include "support/test_database.hpp"

namespace pgjobd::testing {
namespace {

bool maps_libcurl(const DaemonProcess& daemon) {
  return read_text_file("/proc/" + std::to_string(daemon.pid()) + "/maps").find("libcurl.so") !=
         std::string::npos;
}

TEST(StartupE2E, LibcurlIsLoadedOnlyByADaemonWithAnHttpHandler) {
  TestSchema schema;
  {
    DaemonYaml yaml(schema.name());
    yaml.handler("ping", "{builtin: noop}");
    DaemonProcess daemon(yaml.text());
    ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
    schema.insert_jobs("ping", 3);
    ASSERT_TRUE(wait_until([&] { return schema.count("status = 'done'") == 3; }, 15s));
    EXPECT_FALSE(maps_libcurl(daemon)) << "a daemon without http handlers loaded libcurl";
    stop_daemon(daemon);
  }
  {
    // Loaded as the handler is made, before any job: a library that cannot be loaded stops
    // the start instead of failing every job. (Nothing listens on port 9 here.)
    DaemonYaml yaml(schema.name());
    yaml.handler("hook", "{http: {url: \"http://127.0.0.1:9/hook\"}}");
    DaemonProcess daemon(yaml.text());
    ASSERT_TRUE(daemon.wait_ready()) << daemon.log();
    EXPECT_TRUE(maps_libcurl(daemon)) << "the http handler did not load libcurl";
    stop_daemon(daemon);
  }
}

}  // namespace
}  // namespace pgjobd::testing
