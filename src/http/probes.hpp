#pragma once
// /healthz and /readyz, answered the same way on every civetweb listener that serves them:
// the daemon's metrics endpoint (http/http_server) and the dashboard's (ui/ui_server).

#include <functional>
#include <string>

struct mg_connection;

namespace pgjobd {

// Returns an empty string when fine, else why not (shown in the 503 body).
using ReadinessProbe = std::function<std::string()>;

// What a listener's /healthz (liveness) and /readyz (readiness) ask; an empty function
// always answers "fine".
struct Probes {
  ReadinessProbe readiness;
  ReadinessProbe liveness;
};

// Answers a request for /healthz or /readyz from `probes` and returns its status (200, or
// 503 with the reason); any other path: returns 0 and sends nothing. `probes` null: the
// listener has not registered them yet: alive, not yet ready ("starting").
int answer_probe(mg_connection* conn, const Probes* probes);

// Sends `body` as text/plain with `status`, not to be cached nor sniffed (no body for HEAD);
// returns `status`.
int send_plain_text(mg_connection* conn, int status, const std::string& body);

}  // namespace pgjobd
