#pragma once
// How a configured database.url or database.listen_url is shown in logs, messages and
// command output: what libpq parses from it, never the configured text. A password can sit
// in that text in spellings no pattern recognises (`password s3cr3t`, a missing '='), so
// masking the text cannot be trusted; printing only parsed fields can.

#include <string>
#include <string_view>

namespace pgjobd {

// "host=db.example port=5432 dbname=jobs user=app" with the fields the conninfo sets (libpq
// fills the others from the environment and its defaults: "libpq defaults" when none is
// set). A conninfo libpq cannot parse is "a malformed conninfo (libpq: MESSAGE)", MESSAGE
// being libpq's with every quoted fragment that is neither a connection keyword nor one
// delimiter replaced by "…": libpq quotes pieces of the text it could not parse, which may
// be the password.
std::string describe_conninfo(std::string_view conninfo);

// Whether libpq can parse `conninfo`.
bool conninfo_parses(std::string_view conninfo);

}  // namespace pgjobd
