// The HTTP endpoint: prometheus-cpp's Exposer serves /metrics; a civetweb hook adds the probes.
#include "http/http_server.hpp"

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include "http/listener_stop.hpp"
#include "log/secrets.hpp"

namespace pgjobd {

// What the hook asks a server (see ProbeRegistry).
struct Probes {
  ReadinessProbe readiness;
  ReadinessProbe liveness;
};

namespace {

// civetweb's begin_request hook is a plain function pointer and the Exposer's CivetServer
// claims the context's user_data for itself, so the hook cannot be handed its HttpServer.
// It finds it instead through this process-wide registry keyed by the listening port, which
// civetweb reports per request (mg_request_info::server_port). A port identifies one server:
// two servers cannot both listen on it. Entries hold the probe in a shared_ptr so a request
// can call it outside the lock.
struct ProbeRegistry {
  std::mutex mutex;
  std::map<int, std::shared_ptr<const Probes>> by_port;
};

// What `probe` says: "" when fine, else why not; `unknown` before the server registered.
std::string ask(const ReadinessProbe* probe, const char* unknown) {
  if (probe == nullptr) return unknown;
  try {
    return *probe ? (*probe)() : std::string();
  } catch (const std::exception& e) {
    return std::string("probe failed: ") + e.what();
  }
}

ProbeRegistry& probe_registry() {
  static ProbeRegistry registry;
  return registry;
}

void send_text(mg_connection* conn, int status, const std::string& body) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_add(conn, "Content-Length", std::to_string(body.size()).c_str(), -1);
  mg_response_header_send(conn);
  const mg_request_info* info = mg_get_request_info(conn);
  if (std::strcmp(info->request_method, "HEAD") != 0) mg_write(conn, body.data(), body.size());
}

// Answers /healthz and /readyz; returns 0 for anything else so civetweb routes it (/metrics
// to the Exposer, the rest to its 404).
int begin_request(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  const char* uri = info->local_uri != nullptr ? info->local_uri : "";
  const bool health = std::strcmp(uri, "/healthz") == 0;
  if (!health && std::strcmp(uri, "/readyz") != 0) return 0;

  std::shared_ptr<const Probes> probes;
  {
    ProbeRegistry& registry = probe_registry();
    std::lock_guard lock(registry.mutex);
    if (auto found = registry.by_port.find(info->server_port); found != registry.by_port.end()) {
      probes = found->second;
    }
  }
  // A request can beat the registration in the constructor: alive, not yet ready.
  const std::string reason = health ? ask(probes ? &probes->liveness : nullptr, "")
                                    : ask(probes ? &probes->readiness : nullptr, "starting");
  if (reason.empty()) {
    send_text(conn, 200, health ? "ok\n" : "ready\n");
    return 200;
  }
  // The reasons quote database errors: the last line of defence for the password.
  send_text(conn, 503, scrub_process_secrets(reason) + "\n");
  return 503;
}

}  // namespace

struct HttpServer::State {
  int port = 0;
  std::string knock_host;  // see http/listener_stop.hpp
  std::shared_ptr<const Probes> probe;
  // The Exposer keeps only a weak_ptr; holding it here keeps /metrics populated.
  std::shared_ptr<prometheus::Collectable> metrics;
  // Declared last so it is destroyed first: its threads stop before the rest goes away.
  std::optional<prometheus::Exposer> exposer;
};

HttpServer::HttpServer(const std::string& listen, std::shared_ptr<prometheus::Collectable> metrics,
                       ReadinessProbe readiness, ReadinessProbe liveness)
    : state_(std::make_unique<State>()) {
  state_->probe = std::make_shared<const Probes>(Probes{std::move(readiness), std::move(liveness)});
  state_->metrics = std::move(metrics);
  CivetCallbacks callbacks;  // civetweb copies the struct; it need not outlive the call
  callbacks.begin_request = &begin_request;
  try {
    state_->exposer.emplace(listen, 2, &callbacks);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot listen on " + listen + ": " + e.what());
  }
  const std::vector<int> ports = state_->exposer->GetListeningPorts();
  if (ports.empty()) {
    state_->exposer.reset();
    throw std::runtime_error("cannot listen on " + listen + ": no listening port");
  }
  state_->port = ports.front();
  state_->knock_host = knock_address(listen);
  state_->exposer->RegisterCollectable(state_->metrics);
  ProbeRegistry& probes = probe_registry();
  std::lock_guard lock(probes.mutex);
  probes.by_port[state_->port] = state_->probe;
}

HttpServer::~HttpServer() {
  // Stop serving first (joins civetweb's threads), then forget the probe, unless another
  // server has meanwhile taken the port and registered its own.
  stop_with_knocks(state_->knock_host, state_->port, [this] { state_->exposer.reset(); });
  ProbeRegistry& probes = probe_registry();
  std::lock_guard lock(probes.mutex);
  if (auto found = probes.by_port.find(state_->port);
      found != probes.by_port.end() && found->second == state_->probe) {
    probes.by_port.erase(found);
  }
}

int HttpServer::port() const { return state_->port; }

}  // namespace pgjobd
