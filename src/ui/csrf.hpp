#pragma once
// Cross-site request checks: a POST must come from a page of this dashboard. Browsers send
// Origin (or at least Referer) on a form POST, and a page elsewhere cannot forge them; the
// per-session token in each form is the second, independent lock.

#include <string_view>

#include "http/host_header.hpp"

namespace pgjobd::ui {

// True when `url` ("http://host:port" or a Referer "http://host:port/path?...") names the
// origin serving `host` (the request's Host header). http and https both count: behind a
// TLS-terminating proxy the browser says https while this server speaks http.
bool same_origin(std::string_view url, std::string_view host);

// The Origin/Referer rule of every POST: Origin when the browser sent one (and it is not
// "null"), else Referer; neither present means refused.
bool request_from_own_origin(const char* origin, const char* referer, std::string_view host);

// A dashboard listening on loopback accepts only a loopback Host (http/host_header.hpp): a
// DNS-rebinding page is turned away before it can read a token.
using pgjobd::is_loopback_host_header;

}  // namespace pgjobd::ui
