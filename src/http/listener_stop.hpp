#pragma once
// Stopping a civetweb listener promptly. civetweb's listening thread checks for a stop only
// between its waits for a connection, which last up to 2 s (SOCKET_TIMEOUT_QUANTUM in
// civetweb 1.15), and mg_stop waits for that thread: every stop of /metrics or of the
// dashboard took up to 2 s, most of a daemon's exit after its drain. A connection of our
// own ends the wait at once. Its workers wait for a request in the same 2 s steps, and
// mg_stop waits for them too: a client holding a connection without sending on it (a
// browser's idle or preconnected socket to the dashboard) held the exit up to 2 s after
// `drained`. Ending the reading side of the accepted connections ends those waits.

#include <functional>
#include <string>

namespace pgjobd {

// Where to connect to reach a listener on `listen` (host:port, [v6]:port or a bare port,
// as validated by the config): its own address, or loopback for a wildcard or "localhost".
std::string knock_address(const std::string& listen);

// Runs `stop` (which must end with the listener stopped, e.g. by mg_stop) on a thread of its
// own and, until it returns, connects to host:port every 10 ms and closes the connection
// at once, and ends the reading side of every connection accepted on `port`. A knock that lands
// just before the stop begins is served and closed like any other request; a knock after the
// listener closed is refused, which is fine.
void stop_with_knocks(const std::string& host, int port, const std::function<void()>& stop);

}  // namespace pgjobd
