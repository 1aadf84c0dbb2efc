#pragma once
// The http handler: POSTs the payload to a URL (libcurl, or its own client for plain http://).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>

#include "pgjobd/config.hpp"
#include "pgjobd/handler.hpp"

namespace pgjobd {

// Builds a handler from an http HandlerConfig (http_url, timeout). Contract:
// - POST the payload with Content-Type: application/json and headers X-Pgjobd-Job-Id,
//   X-Pgjobd-Job-Type, X-Pgjobd-Job-Queue, X-Pgjobd-Job-Attempt;
// - 2xx → done, the body its result: JSON when the Content-Type is application/json or
//   any +json and it parses, else a JSON string of the text (the job runner bounds it;
//   README "Results"); read to the end, its first max_result_bytes + 1 bytes kept;
// - 408, 429, 5xx, connection errors and timeouts → retry (a Retry-After in
//   seconds or as an HTTP-date becomes JobResult::retry_after); other statuses → dead;
// - last_error: "HTTP 503: <first 4 KiB of the body>" ("HTTP 503" when the body is empty),
//   or curl's error text ("timeout after 10000ms: ..." for timeouts);
// - `stop` aborts the transfer (released); the response body kept is bounded to 4 KiB or
//   max_result_bytes + 1, the larger;
// - timeout 0 means 30 s here: an HTTP peer that never answers must not hold a slot forever.
// The handler is an AsyncHandler: `transfer_threads` threads of its own (at most one per
// connection) drive every request in flight, each request on one of them, and a worker that
// hands a job over is free at once. `concurrency` (worker.concurrency, the most jobs in
// flight) bounds the connections it opens and keeps, all its threads together. Plain
// http:// to an IP literal with no proxy from the environment goes through a client of the
// handler's own (plain_http.hpp), anything else through libcurl; both behave as above.
Handler make_http_handler(const HandlerConfig& config, std::size_t max_result_bytes,
                          int concurrency, int transfer_threads = 0);

// The transfer threads of an http handler made with transfer_threads 0: one per four cores,
// at most four. On 2 cores shared by the daemon, its database and the peer, a second thread
// cost about a fifth more CPU per job for no more jobs/s (each wakes for half the batch); with
// many cores, one thread's requests per second of one core would be the ceiling (not measured:
// bench/README.md).
int default_http_transfer_threads();

// Whether a Content-Type names JSON: application/json or any type/subtype+json, parameters
// (charset) and case aside. Exposed for tests.
bool is_json_media_type(std::string_view content_type);

// The most a Retry-After is taken to ask for; the job runner caps it further, at
// retry.max_delay.
inline constexpr Millis kMaxRetryAfter = std::chrono::hours(24 * 365);

// The delay a Retry-After header value asks for, saturated at kMaxRetryAfter (a huge
// number or a date centuries ahead never overflows); nullopt for a negative number or
// anything that is neither delay-seconds nor an HTTP-date. Exposed for tests.
std::optional<Millis> parse_retry_after(std::string_view value);

// `text` as an HTTP header value: control characters (a CR or LF would end the header and
// start another) and '%' itself are percent-encoded, so a job type or queue name cannot
// add headers to the request, and a receiver can decode it unambiguously. Exposed for tests.
std::string header_value(std::string_view text);

}  // namespace pgjobd
