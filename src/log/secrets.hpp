#pragma once
// Keeping the database password out of every text that leaves the daemon. Pattern masking
// (mask_password) only recognises well-formed conninfo; libpq's errors for a malformed one
// quote fragments of it ("invalid percent-encoded token: \"50%off\""), so the password
// itself, in every spelling the conninfo gives it, is also scrubbed wherever it appears.

#include <string>
#include <string_view>
#include <vector>

namespace pgjobd {

// Shorter candidates are not scrubbed: removing a one- or two-character string from every
// message would garble logs while protecting next to nothing.
inline constexpr std::size_t kMinScrubbedSecretLength = 3;

// Every string that may be the password in a libpq conninfo, well-formed or not: URL
// userinfo (up to the first and up to the last '@', in case the password holds an
// unencoded '@'), a `password=` query parameter, a `password=` key=value entry (quoted or
// not, escapes applied and not), each raw and percent-decoded. Only candidates of at least
// kMinScrubbedSecretLength characters; no duplicates.
std::vector<std::string> conninfo_passwords(std::string_view conninfo);

// conninfo_passwords plus their pieces between URL delimiters (/ ? # @ & = , : [ ]), as
// long as kMinScrubbedSecretLength: libpq's message about a malformed URL can quote such
// a piece. For scrubbing text; too broad to judge whole values by.
std::vector<std::string> conninfo_password_candidates(std::string_view conninfo);

// `text` with every occurrence of each secret replaced by "***", longest secrets first (a
// shorter candidate can be part of a longer one).
std::string scrub_secrets(std::string_view text, const std::vector<std::string>& secrets);

// The process's secrets: what the log formatters scrub from every message and field and
// /readyz from its body. Adding is thread-safe (a reload may add the next config's
// password); the list only grows, so a secret once known is never logged.
void add_process_secrets(const std::vector<std::string>& secrets);
// Adds the password candidates of `conninfo` and the value of PGPASSWORD, when set.
void add_database_secrets(std::string_view conninfo);
// `text` scrubbed of the process's secrets.
std::string scrub_process_secrets(std::string_view text);

}  // namespace pgjobd
