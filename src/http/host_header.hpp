#pragma once
// The Host rule of our listeners bound to loopback (the dashboard's pages, the daemon's
// /metrics, /healthz and /readyz): only loopback names, so that a DNS-rebinding page, whose
// requests carry its own host name, cannot read them.

#include <string_view>

namespace pgjobd {

// The Host header's host part is a loopback name (127.x.y.z, localhost, [::1]). Also true of
// a listen address "host:port" on loopback (127.0.0.1:9464, localhost:9464, [::1]:9464).
bool is_loopback_host_header(std::string_view host);

}  // namespace pgjobd
