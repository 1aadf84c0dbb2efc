#pragma once
// The web dashboard (README "Dashboard"): its own civetweb listener on ui.listen, separate
// from /metrics, serving the pages of src/ui/pages and the actions, behind the login
// (src/ui/auth) and the cross-site checks (src/ui/csrf). URLs, form fields and element ids
// follow the dashboard contract the browser tests rely on.

#include <memory>
#include <string>

#include "pgjobd/config.hpp"
#include "ui/ui_store.hpp"

namespace pgjobd::ui {

class UiServer {
 public:
  // Starts serving `config.listen` ("127.0.0.1:0" picks a free port). The store is used by
  // one request at a time (UiStore is single-threaded). Throws std::runtime_error naming
  // the address when it cannot listen.
  UiServer(const UiConfig& config, std::unique_ptr<UiStore> store);
  ~UiServer();  // stops serving: waits for requests in progress
  UiServer(const UiServer&) = delete;
  UiServer& operator=(const UiServer&) = delete;

  int port() const;

  // Applies the keys a reload may change (users, show_payloads, refresh, session_ttl);
  // listen and statement_timeout stay. Sessions of users removed from the file end at once;
  // a changed role applies to the next request.
  void apply(const UiConfig& config);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace pgjobd::ui
