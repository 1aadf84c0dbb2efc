#pragma once
// The daemon's HTTP endpoint: /metrics (Prometheus text format, served by prometheus-cpp's
// Exposer), /healthz (the process is alive: always 200) and /readyz (200 when the database
// is reachable and the schema current, else 503 with the reason).

#include <functional>
#include <memory>
#include <string>

namespace prometheus {
class Collectable;
}

namespace pgjobd {

// Returns an empty string when ready, else why not (shown in the 503 body).
using ReadinessProbe = std::function<std::string()>;

class HttpServer {
 public:
  // listen: "host:port" ("127.0.0.1:0" picks a free port). Throws std::runtime_error
  // naming the address when it cannot bind.
  HttpServer(const std::string& listen, std::shared_ptr<prometheus::Collectable> metrics,
             ReadinessProbe readiness);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pgjobd
