#pragma once
// Stopping a civetweb listener promptly. civetweb's listening thread checks for a stop only
// between its waits for a connection, which last up to 2 s (SOCKET_TIMEOUT_QUANTUM in
// civetweb 1.15), and mg_stop waits for that thread: every stop of /metrics or of the
// dashboard took up to 2 s, most of a daemon's exit after its drain. A connection of our
// own ends the wait at once.

#include <functional>
#include <string>

namespace pgjobd {

// Where to connect to reach a listener on `listen` (host:port, [v6]:port or a bare port,
// as validated by the config): its own address, or loopback for a wildcard or "localhost".
std::string knock_address(const std::string& listen);

// Runs `stop` (which must end with the listener stopped, e.g. by mg_stop) on a thread of its
// own and, until it returns, connects to host:port every 10 ms and closes the connection
// at once. A knock that lands just before the stop begins is served and closed like any
// other request; a knock after the listener closed is refused, which is fine.
void stop_with_knocks(const std::string& host, int port, const std::function<void()>& stop);

}  // namespace pgjobd
