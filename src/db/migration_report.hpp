#pragma once
// What a migration run did, without libpqxx, for callers outside src/db.

namespace pgjobd {

struct MigrationReport {
  int from_version = 0;  // the schema's version before the run (0: it had no pgjobd tables)
  int to_version = 0;    // its version after; equal to from_version when nothing was pending
  bool stopped = false;  // a stop was requested while it waited for the migration lock:
                         // nothing was applied
};

}  // namespace pgjobd
