// /healthz and /readyz for any civetweb listener: ask the probe, answer 200 or 503.
#include "http/probes.hpp"

#include <civetweb.h>

#include <cstring>
#include <exception>

#include "log/secrets.hpp"

namespace pgjobd {
namespace {

// What `probe` says: "" when fine, else why not; `unknown` when there is no probe yet.
std::string ask(const ReadinessProbe* probe, const char* unknown) {
  if (probe == nullptr) return unknown;
  try {
    return *probe ? (*probe)() : std::string();
  } catch (const std::exception& e) {
    return std::string("probe failed: ") + e.what();
  }
}

}  // namespace

int send_plain_text(mg_connection* conn, int status, const std::string& body) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  // A browser must not take the text (a database error quoted in a 503, a label value in
  // /metrics) for HTML or script.
  mg_response_header_add(conn, "X-Content-Type-Options", "nosniff", -1);
  mg_response_header_add(conn, "Content-Length", std::to_string(body.size()).c_str(), -1);
  mg_response_header_send(conn);
  const mg_request_info* info = mg_get_request_info(conn);
  if (std::strcmp(info->request_method, "HEAD") != 0) mg_write(conn, body.data(), body.size());
  return status;
}

int answer_probe(mg_connection* conn, const Probes* probes) {
  const mg_request_info* info = mg_get_request_info(conn);
  const char* uri = info->local_uri != nullptr ? info->local_uri : "";
  const bool health = std::strcmp(uri, "/healthz") == 0;
  if (!health && std::strcmp(uri, "/readyz") != 0) return 0;
  const std::string reason = health ? ask(probes ? &probes->liveness : nullptr, "")
                                    : ask(probes ? &probes->readiness : nullptr, "starting");
  if (reason.empty()) {
    send_plain_text(conn, 200, health ? "ok\n" : "ready\n");
    return 200;
  }
  // The reasons quote database errors: the last line of defence for the password.
  send_plain_text(conn, 503, scrub_process_secrets(reason) + "\n");
  return 503;
}

}  // namespace pgjobd
