#pragma once
// The daemon's HTTP endpoint: /metrics (Prometheus text format, served by prometheus-cpp's
// Exposer), /healthz (liveness: 200 unless a loop the daemon depends on is wedged, then 503
// with the reason) and /readyz (200 when the database is reachable and answering and the
// schema current, else 503 with the reason).

#include <memory>
#include <string>

#include "http/probes.hpp"

namespace prometheus {
class Collectable;
}

namespace pgjobd {

class HttpServer {
 public:
  // listen: "host:port" ("127.0.0.1:0" picks a free port). Throws std::runtime_error
  // naming the address and why when it cannot bind ("cannot listen on 127.0.0.1:9464:
  // address already in use").
  // `liveness` answers like a readiness probe: empty when alive; none: always alive.
  HttpServer(const std::string& listen, std::shared_ptr<prometheus::Collectable> metrics,
             ReadinessProbe readiness, ReadinessProbe liveness = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pgjobd
