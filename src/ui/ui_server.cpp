// civetweb glue for the dashboard: a context of its own (not the /metrics Exposer's), every
// request handled in begin_request and passed to the Dashboard as a Request.
#include "ui/ui_server.hpp"

#include <civetweb.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "http/listen_address.hpp"
#include "http/listener_stop.hpp"
#include "http/probes.hpp"
#include "ui/dashboard.hpp"

namespace pgjobd::ui {

struct UiServer::State {
  explicit State(const UiConfig& config, std::unique_ptr<UiStore> store)
      : dashboard(config, std::move(store)),
        probes{[this] { return dashboard.database_problem(); }, {}} {}
  Dashboard dashboard;
  // /healthz: the process serves; /readyz: the database answers the dashboard's store.
  Probes probes;
  mg_context* context = nullptr;
  int port = 0;
  std::string knock_host;  // see http/listener_stop.hpp
};

namespace {

// Sent with every answer: no framing by other sites, nothing loaded from elsewhere, no
// content sniffing, and Referer only to this dashboard itself (the POST check reads it).
void add_security_headers(mg_connection* conn) {
  mg_response_header_add(conn, "Content-Security-Policy",
                         "default-src 'self'; frame-ancestors 'none'; form-action 'self'; "
                         "base-uri 'none'",
                         -1);
  mg_response_header_add(conn, "X-Content-Type-Options", "nosniff", -1);
  mg_response_header_add(conn, "X-Frame-Options", "DENY", -1);
  mg_response_header_add(conn, "Referrer-Policy", "same-origin", -1);
}

void send(mg_connection* conn, const Response& response, bool head) {
  mg_response_header_start(conn, response.status);
  add_security_headers(conn);
  mg_response_header_add(conn, "Content-Type", response.content_type.c_str(), -1);
  bool cache_set = false;
  for (const auto& [name, value] : response.headers) {
    mg_response_header_add(conn, name.c_str(), value.c_str(), -1);
    cache_set = cache_set || name == "Cache-Control";
  }
  if (!cache_set) mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_add(conn, "Content-Length", std::to_string(response.body.size()).c_str(), -1);
  mg_response_header_send(conn);
  if (!head) mg_write(conn, response.body.data(), response.body.size());
}

std::optional<std::string> header(mg_connection* conn, const char* name) {
  const char* value = mg_get_header(conn, name);
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

// Reads the body up to Dashboard::kMaxBody: 0 when read, else the status that refuses it
// (413 longer, 408 not all there within the deadline or the connection failed).
int read_body(mg_connection* conn, std::string& body) {
  char buffer[8192];
  while (true) {
    const int got = mg_read(conn, buffer, sizeof buffer);
    if (got == 0) return 0;
    // The connection's deadline interrupted the read (http/listener_stop.hpp), or it broke.
    if (got < 0) return 408;
    if (body.size() + static_cast<std::size_t>(got) > Dashboard::kMaxBody) return 413;
    body.append(buffer, static_cast<std::size_t>(got));
  }
}

void send_text(mg_connection* conn, int status, const char* text) {
  Response response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = text;
  send(conn, response, false);
}

int begin_request(mg_connection* conn) {
  auto* state = static_cast<UiServer::State*>(mg_get_user_data(mg_get_context(conn)));
  const mg_request_info* info = mg_get_request_info(conn);
  const bool post =
      info->request_method != nullptr && std::strcmp(info->request_method, "POST") == 0;
  if (!post) request_read();  // a POST's body is still to come (read_body)
  // Before the login and the Host check: a load balancer or kubelet probes without either.
  if (const int status = answer_probe(conn, &state->probes)) return status;
  Request request;
  request.method = info->request_method != nullptr ? info->request_method : "";
  // The decoded path before civetweb's clean-up, so that a queue name with "/" or ".."
  // in it reaches the route as it is.
  const char* path = info->local_uri_raw != nullptr ? info->local_uri_raw : info->local_uri;
  request.path = path != nullptr ? path : "";
  request.query = info->query_string != nullptr ? info->query_string : "";
  request.host = header(conn, "Host").value_or("");
  request.origin = header(conn, "Origin");
  request.referer = header(conn, "Referer");
  request.remote_address = info->remote_addr;
  request.port = info->server_port;
  if (const char* cookies = mg_get_header(conn, "Cookie")) {
    char value[256];
    if (mg_get_cookie(cookies, session_cookie_name(request.port).c_str(), value, sizeof value) >
        0) {
      request.session_id = value;
    }
  }
  if (post) {
    if (const int refused = read_body(conn, request.body)) {
      send_text(
          conn, refused,
          refused == 413 ? "request body too large\n" : "request body not received in time\n");
      return refused;
    }
    request_read();
  }
  Response response;
  try {
    response = state->dashboard.handle(request);
  } catch (const std::exception& e) {
    // Rendering itself failed (out of memory, a random source gone): still an answer.
    spdlog::error("dashboard: {} {}: {}", request.method, request.path, e.what());
    response.status = 500;
    response.content_type = "text/plain; charset=utf-8";
    response.body = "internal error\n";
  }
  send(conn, response, request.method == "HEAD");
  return response.status;
}

// civetweb's own messages (a refused connection, a bad request line) go to our log.
int log_message(const mg_connection* /*conn*/, const char* message) {
  spdlog::debug("dashboard http: {}", message);
  return 1;
}

// civetweb takes numeric addresses only.
std::string civetweb_listen(const std::string& listen) {
  if (listen.starts_with("localhost:")) return "127.0.0.1" + listen.substr(9);
  return listen;
}

}  // namespace

UiServer::UiServer(const UiConfig& config, std::unique_ptr<UiStore> store)
    : state_(std::make_unique<State>(config, std::move(store))) {
  mg_init_library(0);
  const std::string ports = civetweb_listen(config.listen);
  // Slow clients: README "Dashboard" and http/listener_stop.hpp.
  const std::string threads = std::to_string(kListenerThreads);
  const std::string request_timeout = request_timeout_option();
  const char* options[] = {
      "listening_ports",    ports.c_str(),           "num_threads", threads.c_str(),
      "request_timeout_ms", request_timeout.c_str(), nullptr};
  mg_callbacks callbacks{};
  callbacks.begin_request = &begin_request;
  callbacks.log_message = &log_message;
  watch_workers(callbacks);
  state_->context = mg_start(&callbacks, state_.get(), options);
  if (state_->context == nullptr) {
    mg_exit_library();
    const std::string why = bind_failure(ports);
    throw std::runtime_error("dashboard: cannot listen on " + config.listen +
                             (why.empty() ? "" : ": " + why));
  }
  mg_server_port listening[4];
  const int count = mg_get_server_ports(state_->context, 4, listening);
  if (count < 1) {
    mg_stop(state_->context);
    mg_exit_library();
    throw std::runtime_error("dashboard: cannot listen on " + config.listen + ": no port");
  }
  state_->port = listening[0].port;
  state_->knock_host = knock_address(config.listen);
}

UiServer::~UiServer() {
  // Waits for requests in progress; milliseconds otherwise (http/listener_stop.hpp).
  stop_with_knocks(state_->knock_host, state_->port, state_->context,
                   [this] { mg_stop(state_->context); });
  mg_exit_library();
}

int UiServer::port() const { return state_->port; }

void UiServer::apply(const UiConfig& config) { state_->dashboard.apply(config); }

}  // namespace pgjobd::ui
