#pragma once
// Stopping a civetweb listener promptly. mg_stop waits for the listening thread and every
// worker, and each checks for a stop only between its polls, which last up to 2 s
// (SOCKET_TIMEOUT_QUANTUM in civetweb 1.15): the listening thread's for a connection, a
// worker's for a request on the connection it serves. Every stop of /metrics or of the
// dashboard took up to 2 s, and so did the daemon's exit after `drained` while a client held
// a connection without sending on it (a browser's idle or preconnected socket, a scraper's).
// A connection of our own ends the listening thread's wait; a signal ends a worker's:
// poll() is never restarted after a signal handler (signal(7)), and civetweb takes its
// failure as the connection's end.
//
// civetweb hands out no worker's socket, and a descriptor found any other way may be closed
// and reused by the time it is touched. Threads are safe to name instead: each worker lists
// itself while it serves a connection (civetweb's init_connection callback, on the worker)
// and unlists itself when it closes it and before it exits (connection_close, exit_thread,
// both on the worker), all under one mutex, which the stop also holds while it signals the
// listed ones: a listed thread is alive.
//
// The same list bounds slow and idle clients (README "Metrics" and "Dashboard"). civetweb
// serves one connection per worker and bounds a request's headers by request_timeout_ms,
// but not its body: a body trickling a byte at a time holds mg_read for as long as the
// client likes. So each listed worker carries a deadline, and one watchdog thread signals a
// worker whose deadline passed (again every 10 ms until it lets the connection go): the
// request, headers and body, must be read within kRequestReadDeadline of the worker taking
// the connection. A connection from an address that already holds kConnectionsPerAddress
// workers of the listener gets a deadline of now (the watchdog reads the address; civetweb
// does not show it to init_connection): it is closed within milliseconds, unanswered.

#include <chrono>
#include <functional>
#include <string>

struct mg_callbacks;
struct mg_context;

namespace pgjobd {

// Where to connect to reach a listener on `listen` (host:port, [v6]:port or a bare port,
// as validated by the config): its own address, or loopback for a wildcard or "localhost".
std::string knock_address(const std::string& listen);

// The bounds every watched listener applies (see above). With keep-alive off (civetweb's
// default, which our listeners keep) a connection carries one request, so these bound the
// connection's reads too.
inline constexpr std::chrono::milliseconds kRequestReadDeadline{5000};
inline constexpr int kConnectionsPerAddress = 8;
// Workers per listener: more than the slow connections the tests hold open (50, from 50
// addresses) while the probes must still answer. Each holds one 16 KB request buffer
// (civetweb's max_request_size) and a stack whose touched pages are a few tens of KB.
inline constexpr int kListenerThreads = 64;

// civetweb's request_timeout_ms for a watched listener: the same bound for the headers,
// which civetweb enforces itself when the watchdog's signal lands outside its poll.
std::string request_timeout_option();

// Called by a listener's begin_request hook on the worker once the request is read in full
// (for the dashboard after its body): what follows, the answer, has no deadline of ours.
void request_read();

// Sets the callbacks that list a listener's workers (init_connection, connection_close,
// exit_thread) and learn its context (init_context, see context_started_here) in
// `callbacks`, which must not use them otherwise; and the handler of the signal that
// interrupts the workers' waits, installed with SA_RESTART so that reads and writes in
// progress (an answer being sent, a dashboard page's database calls) carry on.
void watch_workers(mg_callbacks& callbacks);

// The context that the last mg_start on this thread with watch_workers' callbacks made:
// how a listener started through a wrapper that does not say (prometheus' Exposer) learns it.
const mg_context* context_started_here();

// Runs `stop` (which must end with `context` stopped, e.g. by mg_stop) on a thread of its
// own and, until it returns, every 10 ms connects to host:port and closes the connection at
// once, and signals the workers of `context` that serve a connection. A knock that lands just
// before the stop begins is served and closed like any other request; a knock after the
// listener closed is refused, which is fine. A signalled worker gives up the read it waits
// in (for a request or a body) and closes the connection, as it would at its next check of
// the stop; an answer being written goes on (civetweb polls again after an interrupted poll).
void stop_with_knocks(const std::string& host, int port, const mg_context* context,
                      const std::function<void()>& stop);

}  // namespace pgjobd
