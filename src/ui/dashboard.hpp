#pragma once
// The dashboard's request handling, apart from the HTTP server that feeds it: one Request
// in, one Response out. Routing, authentication, the cross-site checks, the store calls and
// the choice of page all happen here; ui_server.cpp only moves bytes.

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pgjobd/config.hpp"
#include "ui/auth.hpp"
#include "ui/ui_store.hpp"

namespace pgjobd::ui {

// The session cookie's name on the dashboard listening on `port`: "pgjobd_session_PORT".
// Browsers keep cookies per host, not per port, so two dashboards on one host under one
// name would replace each other's sessions at every login.
std::string session_cookie_name(int port);

struct Request {
  std::string method;  // GET, HEAD or POST (others are refused)
  std::string path;    // URL-decoded, without the query string
  std::string query;   // raw, without '?'
  std::string body;    // form body of a POST
  std::string host;    // the Host header
  std::optional<std::string> origin, referer;
  std::string session_id;  // the session_cookie_name(port) cookie, empty when absent
  std::string remote_address;
  int port = 0;  // the port this request came in on
};

struct Response {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond the security headers
};

class Dashboard {
 public:
  Dashboard(const UiConfig& config, std::unique_ptr<UiStore> store);

  Response handle(const Request& request);
  // The dashboard's readiness (its /readyz): "" when the database answers the store, else
  // "database: " and why not.
  std::string database_problem();
  void apply(const UiConfig& config);

  // Largest form body accepted: a bulk action over a full page of ids fits many times over.
  static constexpr std::size_t kMaxBody = 64 * 1024;

 private:
  struct Caller;  // who asks, once authenticated

  std::shared_ptr<const UiConfig> config();
  Response route_get(const Request& request, const Caller& caller, const UiConfig& config);
  Response route_post(const Request& request, const Caller& caller, const UiConfig& config);
  Response login(const Request& request, const UiConfig& config);
  Response error_page(const Caller* caller, const UiConfig& config, int status,
                      const std::string& message);
  bool schedules_exist();

  std::mutex config_mutex_;
  std::shared_ptr<const UiConfig> config_;
  bool loopback_only_;  // the listen address is loopback: Host must be too

  SessionTable sessions_;
  LoginThrottle login_throttle_;
  PasswordGate password_gate_;

  // UiStore is used by one thread at a time; civetweb serves on several.
  std::mutex store_mutex_;
  std::unique_ptr<UiStore> store_;

  // Whether the navigation links to /schedules: asked at most every 30 s, not per page.
  std::mutex schedules_mutex_;
  std::chrono::steady_clock::time_point schedules_checked_{};
  bool schedules_exist_ = false;
};

}  // namespace pgjobd::ui
