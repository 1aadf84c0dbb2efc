#pragma once
// The engine's seam to the database: what one connection can do with the jobs table. Each
// engine part takes only its role's interface (claim_store.hpp, completion_store.hpp,
// heartbeat_store.hpp, limit_store.hpp, maintenance_stores.hpp), so a fake for one part is
// small and a change to one role touches no other; JobStore is all of them over one
// session, as Database::open_store hands it out. src/db/ implements it over PostgreSQL
// (PgJobStore); tests/support/ has a fake, so the engine's parts are unit-tested without a
// server. Every method throws DbError on failure; an implementation reconnects by itself on
// its next call.
//
// A store is used by one thread at a time (libpq connections are not shared); every
// engine thread that talks to the database is given a store of its own.

#include "store/claim_store.hpp"
#include "store/completion_store.hpp"
#include "store/heartbeat_store.hpp"
#include "store/limit_store.hpp"
#include "store/maintenance_stores.hpp"

namespace pgjobd {

class JobStore : public ClaimStore,
                 public CompletionStore,
                 public SqlJobStore,
                 public HeartbeatStore,
                 public LeadershipStore,
                 public RetentionStore,
                 public DependencyStore,
                 public StatisticsStore,
                 public LimitStore,
                 public DaemonRegistryStore {};

}  // namespace pgjobd
