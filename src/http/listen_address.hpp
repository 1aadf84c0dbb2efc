#pragma once
// The listen addresses of our HTTP listeners (metrics.listen, ui.listen): "host:port",
// "[v6]:port" or a bare port, as validated by the config.

#include <string>

namespace pgjobd {

// The host part without brackets ("" for a bare port).
std::string listen_host(const std::string& listen);

// Why `listen` cannot be bound now ("address already in use", "cannot assign requested
// address", ...), found by binding it as civetweb does (SO_REUSEADDR) and letting go at
// once; "" when it can. Asked after civetweb failed to start, whose own message
// ("null context when constructing CivetServer") does not say.
std::string bind_failure(const std::string& listen);

}  // namespace pgjobd
