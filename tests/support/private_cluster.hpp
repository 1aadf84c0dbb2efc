#pragma once
// Fault-test support: a private PostgreSQL cluster a test may restart, stop or reconfigure
// (never the shared PGJOBD_TEST_DATABASE_URL server), a primary with a synchronous standby
// to fail over to, a session on it that survives those faults, and /proc helpers (CPU
// time, children, zombies) for checking the daemon.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/daemon_process.hpp"

namespace pgjobd::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + N when killed by signal N
  std::string out;     // stdout and stderr together
};
// Runs argv (searched in PATH) to completion; killed after `timeout`.
CommandResult run_command(const std::vector<std::string>& argv, const EnvOverrides& env = {},
                          std::chrono::milliseconds timeout = 60s);

// A throwaway cluster of its own, started by PGJOBD_SOURCE_DIR/scripts/pg-cluster.sh with
// --fast on a free port. The first one in a process runs initdb into a template that later
// ones copy (initdb takes seconds, a copy a fraction of one). The destructor stops the
// server and removes its directory, whatever state the test left it in.
class PrivateCluster {
 public:
  PrivateCluster();
  ~PrivateCluster();
  PrivateCluster(const PrivateCluster&) = delete;
  PrivateCluster& operator=(const PrivateCluster&) = delete;

  // postgresql://pgjobd@127.0.0.1:PORT/pgjobd (the pgjobd role is a superuser).
  const std::string& url() const { return url_; }
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

  // `pg-cluster.sh restart`: pg_ctl restart -m fast, which ends every session; returns
  // once the server accepts connections again.
  void restart();
  // `pg-cluster.sh stop`: immediate stop (safe when it is not running).
  void stop();
  // Starts it again, on the same port (so daemons configured with url() reconnect).
  void start();
  // Listens on `address` too (one of this host's, e.g. NetnsLink::host_address()), with
  // trust auth for clients from `cidr`: stops the server and starts it again, and so does
  // every later start().
  void listen_also(const std::string& address, const std::string& cidr);
  // url() with `address` as its host.
  std::string url_on(const std::string& address) const;
  std::string server_log_tail(std::size_t lines = 40) const;

 private:
  std::string dir_;
  std::string url_;
  int port_ = 0;
  std::string listen_also_;
};

// A primary (a PrivateCluster) and a hot standby made from it with `pg_basebackup -R`,
// streaming on a port of its own. The primary's synchronous_standby_names names the
// standby (synchronous_commit stays on): a commit returns only once the standby has
// flushed it, so whatever a client saw committed survives a failover. The standby's own
// configuration names no synchronous standby, so it takes writes at once when promoted.
// The destructor stops both servers and removes both directories, whatever state the test
// left them in.
class ReplicaPair {
 public:
  ReplicaPair();
  ~ReplicaPair();
  ReplicaPair(const ReplicaPair&) = delete;
  ReplicaPair& operator=(const ReplicaPair&) = delete;

  PrivateCluster& primary() { return primary_; }
  const std::string& standby_url() const { return standby_url_; }
  int standby_port() const { return standby_port_; }
  // postgresql://pgjobd@127.0.0.1:PRIMARY,127.0.0.1:STANDBY/pgjobd?target_session_attrs=
  // read-write: libpq connects to whichever of the two takes writes.
  std::string failover_url() const;

  // pg_ctl stop -m immediate on the primary: no shutdown checkpoint, every session cut,
  // as in a crash of its host.
  void stop_primary();
  // pg_ctl promote -w: returns once the standby has left recovery and takes writes.
  void promote_standby();
  std::string standby_log_tail(std::size_t lines = 40) const;

 private:
  PrivateCluster primary_;
  std::string standby_dir_;
  std::string standby_url_;
  int standby_port_ = 0;
};

// The test's own session on a server it injects faults into: application_name
// "pgjobd-fault-test" (so terminate_daemon_sessions() spares it), statement_timeout and
// default_transaction_read_only forced off (database- and role-level settings a test
// injects do not apply to it), and a reconnect-and-retry-once after a lost connection.
// `settings` ("name=value", no spaces) are set for the session too, e.g.
// "synchronous_commit=local" for a test that makes the server's commits wait for a standby.
class ClusterSession {
 public:
  explicit ClusterSession(std::string url, std::string schema = "faults",
                          std::vector<std::string> settings = {});
  ~ClusterSession();
  ClusterSession(const ClusterSession&) = delete;
  ClusterSession& operator=(const ClusterSession&) = delete;

  const std::string& schema() const { return schema_; }
  // Drops and creates `schema` and migrates it.
  void create_schema();

  // As TestSchema: {jobs} is replaced by the quoted table; first column of the first row.
  std::string query(const std::string& sql);
  std::int64_t count(const std::string& where = "true");
  void exec(const std::string& sql);
  // Ids of the jobs matching `where`.
  std::set<std::int64_t> ids(const std::string& where);
  // "status=n, ..." for failure messages.
  std::string summary();
  // pg_terminate_backend on every pgjobd session of this database; returns how many.
  int terminate_daemon_sessions();

 private:
  template <typename Fn>
  auto with_retry(Fn&& fn);
  std::string expand(const std::string& sql) const;

  std::string url_;
  std::string schema_;
  std::string options_;  // the options URL parameter, percent-encoded
  struct Connection;
  std::unique_ptr<Connection> conn_;
};

// CPU time (user + system) the process has used so far, in seconds; nullopt if it is gone.
std::optional<double> cpu_seconds(pid_t pid);
// Pids of the processes whose parent is `parent` (state Z included, or only Z).
std::vector<pid_t> child_pids(pid_t parent, bool zombies_only = false);
// The ids in a side-effect log (one id per line, extra words after it ignored), with how
// many times each occurs.
std::map<std::int64_t, int> id_counts(const std::string& path);

}  // namespace pgjobd::testing
