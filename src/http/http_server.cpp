// The HTTP endpoint: prometheus-cpp's Exposer runs civetweb; its begin_request hook answers
// /metrics and the probes, so that every answer carries our headers and Host rule.
#include "http/http_server.hpp"

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "http/host_header.hpp"
#include "http/listen_address.hpp"
#include "http/listener_stop.hpp"
#include "http/probes.hpp"

namespace pgjobd {

// The series prometheus-cpp's own /metrics handler keeps about itself (README "Metrics"),
// kept the same way by ours, which answers /metrics in its place.
class ScrapeSeries {
 public:
  ScrapeSeries()
      : bytes_(prometheus::BuildCounter()
                   .Name("exposer_transferred_bytes_total")
                   .Help("Transferred bytes to metrics services")
                   .Register(*registry_)
                   .Add({})),
        scrapes_(prometheus::BuildCounter()
                     .Name("exposer_scrapes_total")
                     .Help("Number of times metrics were scraped")
                     .Register(*registry_)
                     .Add({})),
        latencies_(
            prometheus::BuildSummary()
                .Name("exposer_request_latencies")
                .Help("Latencies of serving scrape requests, in microseconds")
                .Register(*registry_)
                .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}})) {
  }

  // The text of `metrics` and of these series, counting this scrape.
  std::string scrape(prometheus::Collectable& metrics) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<prometheus::MetricFamily> families = metrics.Collect();
    for (auto& family : registry_->Collect()) families.push_back(std::move(family));
    std::string text = prometheus::TextSerializer().Serialize(families);
    bytes_.Increment(static_cast<double>(text.size()));
    scrapes_.Increment();
    latencies_.Observe(static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                               std::chrono::steady_clock::now() - start)
                                               .count()));
    return text;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Counter& bytes_;
  prometheus::Counter& scrapes_;
  prometheus::Summary& latencies_;
};

// What the begin_request hook answers for one HttpServer.
struct MetricsListener {
  Probes probes;
  std::shared_ptr<prometheus::Collectable> metrics;
  // Bound to loopback: only a loopback Host is answered (README "Metrics"), so that a
  // DNS-rebinding page cannot read /metrics or the probes' reasons.
  bool loopback_only = false;
  std::shared_ptr<ScrapeSeries> scrapes = std::make_shared<ScrapeSeries>();
};

namespace {

// civetweb's begin_request hook is a plain function pointer and the Exposer's CivetServer
// claims the context's user_data for itself, so the hook cannot be handed its HttpServer.
// It finds it instead through this process-wide registry keyed by the listening port, which
// civetweb reports per request (mg_request_info::server_port). A port identifies one server:
// two servers cannot both listen on it. Entries are shared_ptrs so a request can use one
// outside the lock.
struct ProbeRegistry {
  std::mutex mutex;
  std::map<int, std::shared_ptr<const MetricsListener>> by_port;
};

ProbeRegistry& probe_registry() {
  static ProbeRegistry registry;
  return registry;
}

// Answers /healthz and /readyz (http/probes.hpp) and /metrics; returns 0 for anything else
// so civetweb answers its 404.
int begin_request(mg_connection* conn) {
  request_read();  // no body is read here: the request is in
  const mg_request_info* info = mg_get_request_info(conn);
  std::shared_ptr<const MetricsListener> listener;
  {
    ProbeRegistry& registry = probe_registry();
    std::lock_guard lock(registry.mutex);
    if (auto found = registry.by_port.find(info->server_port); found != registry.by_port.end()) {
      listener = found->second;
    }
  }
  // A request can beat the registration in the constructor: alive, not yet ready.
  if (listener == nullptr) return answer_probe(conn, nullptr);
  // No Host at all is an HTTP/1.0 client, never a browser's page.
  const char* host = mg_get_header(conn, "Host");
  if (listener->loopback_only && host != nullptr && !is_loopback_host_header(host)) {
    return send_plain_text(conn, 403,
                           "this endpoint answers only to a loopback host name such as "
                           "127.0.0.1\n");
  }
  if (const int status = answer_probe(conn, &listener->probes)) return status;
  const char* uri = info->local_uri != nullptr ? info->local_uri : "";
  if (std::strcmp(uri, "/metrics") != 0 || listener->metrics == nullptr) return 0;
  // The Exposer's own handler writes its headers itself, without ours.
  return send_plain_text(conn, 200, listener->scrapes->scrape(*listener->metrics));
}

}  // namespace

struct HttpServer::State {
  int port = 0;
  std::string knock_host;               // see http/listener_stop.hpp
  const mg_context* context = nullptr;  // the Exposer's, which it does not say
  std::shared_ptr<const MetricsListener> listener;
  // Declared last so it is destroyed first: its threads stop before the rest goes away.
  std::optional<prometheus::Exposer> exposer;
};

HttpServer::HttpServer(const std::string& listen, std::shared_ptr<prometheus::Collectable> metrics,
                       ReadinessProbe readiness, ReadinessProbe liveness)
    : state_(std::make_unique<State>()) {
  state_->listener = std::make_shared<const MetricsListener>(
      MetricsListener{Probes{std::move(readiness), std::move(liveness)}, std::move(metrics),
                      is_loopback_host_header(listen)});
  CivetCallbacks callbacks;  // civetweb copies the struct; it need not outlive the call
  callbacks.begin_request = &begin_request;
  watch_workers(callbacks);
  try {
    // Slow clients: README "Metrics" and http/listener_stop.hpp.
    state_->exposer.emplace(
        std::vector<std::string>{"listening_ports", listen, "num_threads",
                                 std::to_string(kListenerThreads), "request_timeout_ms",
                                 request_timeout_option()},
        &callbacks);
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
  ProbeRegistry& probes = probe_registry();
  std::lock_guard lock(probes.mutex);
  probes.by_port[state_->port] = state_->listener;
}

HttpServer::~HttpServer() {
  // Stop serving first (joins civetweb's threads), then forget the probe, unless another
  // server has meanwhile taken the port and registered its own.
  stop_with_knocks(state_->knock_host, state_->port, state_->context,
                   [this] { state_->exposer.reset(); });
  ProbeRegistry& probes = probe_registry();
  std::lock_guard lock(probes.mutex);
  if (auto found = probes.by_port.find(state_->port);
      found != probes.by_port.end() && found->second == state_->listener) {
    probes.by_port.erase(found);
  }
}

int HttpServer::port() const { return state_->port; }

}  // namespace pgjobd
