// The HTTP endpoint: prometheus-cpp's Exposer serves /metrics; a civetweb hook adds the probes.
#include "http/http_server.hpp"

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>

#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include "http/listen_address.hpp"
#include "http/listener_stop.hpp"
#include "http/probes.hpp"

namespace pgjobd {

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

ProbeRegistry& probe_registry() {
  static ProbeRegistry registry;
  return registry;
}

// Answers /healthz and /readyz (http/probes.hpp); returns 0 for anything else so civetweb
// routes it (/metrics to the Exposer, the rest to its 404).
int begin_request(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  std::shared_ptr<const Probes> probes;
  {
    ProbeRegistry& registry = probe_registry();
    std::lock_guard lock(registry.mutex);
    if (auto found = registry.by_port.find(info->server_port); found != registry.by_port.end()) {
      probes = found->second;
    }
  }
  // A request can beat the registration in the constructor: alive, not yet ready.
  return answer_probe(conn, probes.get());
}

}  // namespace

struct HttpServer::State {
  int port = 0;
  std::string knock_host;               // see http/listener_stop.hpp
  const mg_context* context = nullptr;  // the Exposer's, which it does not say
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
  watch_workers(callbacks);
  try {
    state_->exposer.emplace(listen, 2, &callbacks);
  } catch (const std::exception& e) {
    const std::string why = bind_failure(listen);
    throw std::runtime_error("cannot listen on " + listen + ": " + (why.empty() ? e.what() : why));
  }
  const std::vector<int> ports = state_->exposer->GetListeningPorts();
  if (ports.empty()) {
    state_->exposer.reset();
    throw std::runtime_error("cannot listen on " + listen + ": no listening port");
  }
  state_->port = ports.front();
  state_->knock_host = knock_address(listen);
  state_->context = context_started_here();
  state_->exposer->RegisterCollectable(state_->metrics);
  ProbeRegistry& probes = probe_registry();
  std::lock_guard lock(probes.mutex);
  probes.by_port[state_->port] = state_->probe;
}

HttpServer::~HttpServer() {
  // Stop serving first (joins civetweb's threads), then forget the probe, unless another
  // server has meanwhile taken the port and registered its own.
  stop_with_knocks(state_->knock_host, state_->port, state_->context,
                   [this] { state_->exposer.reset(); });
  ProbeRegistry& probes = probe_registry();
  std::lock_guard lock(probes.mutex);
  if (auto found = probes.by_port.find(state_->port);
      found != probes.by_port.end() && found->second == state_->probe) {
    probes.by_port.erase(found);
  }
}

int HttpServer::port() const { return state_->port; }

}  // namespace pgjobd
