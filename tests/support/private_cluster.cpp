// PrivateCluster (pg-cluster.sh on a template copy), ReplicaPair (a synchronous standby made
// from one), ClusterSession and the /proc helpers.

#include "support/private_cluster.hpp"
#include "support/build_paths.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <pqxx/pqxx>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "db/migrator.hpp"
#include "db/sql_text.hpp"
#include "support/wait_until.hpp"

extern char** environ;

namespace pgjobd::testing {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kClusterScript = source_path("scripts/pg-cluster.sh");
const std::string kPgBin = "/usr/lib/postgresql/15/bin";
// A PGJOBD_TEST_PORT meant for the shared server must not place a private one on its port.
const EnvOverrides kAnyPort = {{"PGJOBD_TEST_PORT", std::nullopt}};

std::string make_temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  }
  return pattern;
}

std::string tail_lines(const std::string& text, std::size_t n) {
  std::size_t pos = text.size();
  std::size_t lines = 0;
  while (pos > 0) {
    if (text[pos - 1] == '\n' && ++lines > n) break;
    --pos;
  }
  return text.substr(pos);
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

CommandResult checked(const std::vector<std::string>& argv, const EnvOverrides& env = {}) {
  CommandResult result = run_command(argv, env);
  if (result.exit_code != 0) {
    std::string command;
    for (const auto& word : argv) command += word + " ";
    throw std::runtime_error(command + "failed with exit code " + std::to_string(result.exit_code) +
                             ": " + result.out);
  }
  return result;
}

// initdb once per process; each cluster copies the stopped template's data directory.
class ClusterTemplate {
 public:
  static std::string data_dir() {
    static ClusterTemplate instance;
    std::lock_guard lock(instance.mutex_);
    if (instance.dir_.empty()) {
      const std::string dir = make_temp_dir("pgjobd-pgtemplate");
      try {
        checked({kClusterScript, "start", dir, "--fast"}, kAnyPort);
        // A clean shutdown, so copies start without crash recovery.
        checked({"runuser", "-u", "postgres", "--", kPgBin + "/pg_ctl", "-D", dir + "/data", "-m",
                 "fast", "-w", "stop"});
      } catch (...) {
        run_command({kClusterScript, "stop", dir});
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
        throw;
      }
      instance.dir_ = dir;
    }
    return instance.dir_ + "/data";
  }

 private:
  ClusterTemplate() = default;
  ~ClusterTemplate() {
    if (dir_.empty()) return;
    run_command({kClusterScript, "stop", dir_});
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::mutex mutex_;
  std::string dir_;
};

// `url` with more query parameters (`url` may already have some, e.g. a multi-host URL's
// target_session_attrs).
std::string with_parameters(const std::string& url, const std::string& parameters) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + parameters;
}

// The standby's application_name, which the primary's synchronous_standby_names names.
constexpr const char* kStandbyName = "pgjobd_standby";

std::vector<std::string> environment_with(const EnvOverrides& overrides) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto equals = text.find('=');
    if (equals != std::string::npos) env[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& [name, value] : overrides) {
    if (value) {
      env[name] = *value;
    } else {
      env.erase(name);
    }
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> array;
  for (auto& text : strings) array.push_back(text.data());
  array.push_back(nullptr);
  return array;
}

// "PID (comm) S PPID ...": the fields after the last ')' (comm may contain anything).
std::vector<std::string> stat_fields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(stat.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;  // [0] state, [1] ppid, ..., [11] utime, [12] stime
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, const EnvOverrides& env,
                          std::chrono::milliseconds timeout) {
  const std::string dir = make_temp_dir("pgjobd-cmd");
  const std::string out_path = dir + "/out";
  std::vector<std::string> argv_strings = argv;
  std::vector<std::string> env_strings = environment_with(env);
  std::vector<char*> argv_array = c_array(argv_strings);
  std::vector<char*> env_array = c_array(env_strings);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attributes, &empty);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  const int error = posix_spawnp(&pid, argv_strings.at(0).c_str(), &actions, &attributes,
                                 argv_array.data(), env_array.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  CommandResult result;
  if (error != 0) {
    result.out = "cannot run " + argv.at(0) + ": " + std::strerror(error);
  } else {
    const auto deadline = Clock::now() + timeout;
    int status = 0;
    while (true) {
      const pid_t got = waitpid(pid, &status, WNOHANG);
      if (got == pid) break;
      if (got < 0 && errno != EINTR) {
        status = -1;
        break;
      }
      if (Clock::now() >= deadline) {
        ::kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (status != -1) {
      result.exit_code = WIFEXITED(status)     ? WEXITSTATUS(status)
                         : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                               : -1;
    }
    result.out = read_text_file(out_path);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return result;
}

PrivateCluster::PrivateCluster() {
  const std::string template_data = ClusterTemplate::data_dir();
  dir_ = make_temp_dir("pgjobd-cluster");
  try {
    checked({"cp", "-a", template_data, dir_ + "/data"});
    checked({kClusterScript, "start", dir_, "--fast"}, kAnyPort);
    url_ = trimmed(read_text_file(dir_ + "/url"));
    port_ = std::stoi(read_text_file(dir_ + "/port"));
  } catch (...) {
    run_command({kClusterScript, "stop", dir_});
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw;
  }
}

PrivateCluster::~PrivateCluster() {
  run_command({kClusterScript, "stop", dir_});
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void PrivateCluster::restart() { checked({kClusterScript, "restart", dir_}); }

void PrivateCluster::stop() { checked({kClusterScript, "stop", dir_}); }

void PrivateCluster::start() {
  checked({kClusterScript, "start", dir_, "--fast"},
          {{"PGJOBD_TEST_PORT", std::to_string(port_)},
           {"PGJOBD_TEST_LISTEN_ALSO",
            listen_also_.empty() ? std::nullopt : std::optional<std::string>(listen_also_)}});
}

void PrivateCluster::listen_also(const std::string& address, const std::string& cidr) {
  {
    std::ofstream hba(dir_ + "/data/pg_hba.conf", std::ios::app);
    hba << "host all all " << cidr << " trust\n";
    if (!hba.flush()) throw std::runtime_error("cannot append to " + dir_ + "/data/pg_hba.conf");
  }
  listen_also_ = listen_also_.empty() ? address : listen_also_ + "," + address;
  stop();
  start();
}

std::string PrivateCluster::url_on(const std::string& address) const {
  return "postgresql://pgjobd@" + address + ":" + std::to_string(port_) + "/pgjobd";
}

std::string PrivateCluster::server_log_tail(std::size_t lines) const {
  return tail_lines(read_text_file(dir_ + "/server.log"), lines);
}

ReplicaPair::ReplicaPair() {
  standby_dir_ = make_temp_dir("pgjobd-standby");
  try {
    // pg_basebackup runs as the server's user, like the server, into a directory it owns.
    checked({"chown", "postgres:", standby_dir_});
    // -R writes primary_conninfo (with this application_name) and standby.signal; -c fast
    // starts the backup without waiting for a spread checkpoint; --no-sync skips flushing
    // the copy to disk, seconds on a busy machine (like pg-cluster.sh --fast, nothing here
    // is tested against power loss).
    checked({"runuser", "-u", "postgres", "--", kPgBin + "/pg_basebackup", "-d",
             "host=127.0.0.1 port=" + std::to_string(primary_.port()) +
                 " user=postgres application_name=" + kStandbyName,
             "-D", standby_dir_ + "/data", "-R", "-c", "fast", "-X", "stream", "--no-sync"});
    checked({kClusterScript, "start", standby_dir_, "--fast"}, kAnyPort);
    standby_url_ = trimmed(read_text_file(standby_dir_ + "/url"));
    standby_port_ = std::stoi(read_text_file(standby_dir_ + "/port"));
    // Set only now: in the base backup it would make the promoted standby wait for a
    // standby of its own on every commit. ALTER SYSTEM writes the primary's
    // postgresql.auto.conf, which replication does not carry.
    ClusterSession admin(primary_.url());
    admin.exec(std::string("ALTER SYSTEM SET synchronous_standby_names = '") + kStandbyName + "'");
    admin.exec("SELECT pg_reload_conf()");
    const std::string sync_state_sql =
        std::string(
            "SELECT coalesce(max(sync_state), 'none') FROM pg_stat_replication "
            "WHERE state = 'streaming' AND application_name = '") +
        kStandbyName + "'";
    if (!wait_until([&] { return admin.query(sync_state_sql) == "sync"; }, 60s)) {
      throw std::runtime_error("the standby is not a streaming synchronous standby after 60 s (" +
                               admin.query(sync_state_sql) + "); its log ends:\n" +
                               standby_log_tail());
    }
  } catch (...) {
    run_command({kClusterScript, "stop", standby_dir_});
    std::error_code ignored;
    std::filesystem::remove_all(standby_dir_, ignored);
    throw;
  }
}

ReplicaPair::~ReplicaPair() {
  run_command({kClusterScript, "stop", standby_dir_});
  std::error_code ignored;
  std::filesystem::remove_all(standby_dir_, ignored);
}

std::string ReplicaPair::failover_url() const {
  return "postgresql://pgjobd@127.0.0.1:" + std::to_string(primary_.port()) +
         ",127.0.0.1:" + std::to_string(standby_port_) + "/pgjobd?target_session_attrs=read-write";
}

void ReplicaPair::stop_primary() { primary_.stop(); }

void ReplicaPair::promote_standby() {
  checked({"runuser", "-u", "postgres", "--", kPgBin + "/pg_ctl", "-D", standby_dir_ + "/data",
           "-w", "-t", "60", "promote"});
}

std::string ReplicaPair::standby_log_tail(std::size_t lines) const {
  return tail_lines(read_text_file(standby_dir_ + "/server.log"), lines);
}

struct ClusterSession::Connection {
  explicit Connection(const std::string& url) : conn(url) {}
  pqxx::connection conn;
};

ClusterSession::ClusterSession(std::string url, std::string schema,
                               std::vector<std::string> settings)
    : url_(std::move(url)), schema_(std::move(schema)) {
  // Options beat database- and role-level settings: the test's own statements work while
  // it makes the daemon's sessions read-only or time out.
  settings.insert(settings.begin(), {"statement_timeout=0", "default_transaction_read_only=off"});
  for (const std::string& setting : settings) {
    options_ += (options_.empty() ? "-c%20" : "%20-c%20");
    for (const char c : setting) options_ += c == '=' ? std::string("%3D") : std::string(1, c);
  }
}

ClusterSession::~ClusterSession() = default;

template <typename Fn>
auto ClusterSession::with_retry(Fn&& fn) {
  for (int attempt = 1;; ++attempt) {
    try {
      if (!conn_ || !conn_->conn.is_open()) {
        conn_.reset();
        conn_ = std::make_unique<Connection>(with_parameters(
            url_, "application_name=fault-test&connect_timeout=5&options=" + options_));
      }
      // A server-side close (restart, terminate) shows up here without a statement:
      // libpqxx 6 leaks the PGresult of a statement that fails on a dead connection.
      conn_->conn.get_notifs();
      pqxx::nontransaction txn(conn_->conn);
      return fn(txn);
    } catch (const pqxx::broken_connection&) {
      conn_.reset();
      if (attempt >= 2) throw;
    } catch (const pqxx::sql_error& e) {
      // 57P01 and friends: the server ended this session (restart, terminate).
      const bool session_ended = e.sqlstate().rfind("57P", 0) == 0;
      conn_.reset();
      if (!session_ended || attempt >= 2) throw;
    }
  }
}

std::string ClusterSession::expand(const std::string& sql) const {
  std::string text = sql;
  const std::string table = quote_identifier(schema_) + ".jobs";
  for (auto pos = text.find("{jobs}"); pos != std::string::npos; pos = text.find("{jobs}", pos)) {
    text.replace(pos, 6, table);
  }
  return text;
}

void ClusterSession::create_schema() {
  with_retry([&](pqxx::nontransaction& txn) {
    txn.exec("DROP SCHEMA IF EXISTS " + quote_identifier(schema_) + " CASCADE");
    return 0;
  });
  pqxx::connection conn(with_parameters(url_, "application_name=fault-test"));
  migrate(conn, schema_);
}

std::string ClusterSession::query(const std::string& sql) {
  return with_retry([&](pqxx::nontransaction& txn) -> std::string {
    const auto rows = txn.exec(expand(sql));
    if (rows.empty() || rows[0][0].is_null()) return "";
    return rows[0][0].c_str();
  });
}

std::int64_t ClusterSession::count(const std::string& where) {
  return std::stoll(query("SELECT count(*) FROM {jobs} WHERE " + where));
}

void ClusterSession::exec(const std::string& sql) {
  with_retry([&](pqxx::nontransaction& txn) {
    txn.exec(expand(sql));
    return 0;
  });
}

std::set<std::int64_t> ClusterSession::ids(const std::string& where) {
  return with_retry([&](pqxx::nontransaction& txn) {
    std::set<std::int64_t> out;
    for (const auto& row : txn.exec(expand("SELECT id FROM {jobs} WHERE " + where))) {
      out.insert(row[0].as<std::int64_t>());
    }
    return out;
  });
}

std::string ClusterSession::summary() {
  try {
    return "jobs by status: " +
           query(
               "SELECT coalesce(string_agg(status || '=' || n, ', ' ORDER BY status), 'none') "
               "FROM (SELECT status, count(*) n FROM {jobs} GROUP BY status) s");
  } catch (const std::exception& e) {
    return std::string("jobs by status: unavailable (") + e.what() + ")";
  }
}

int ClusterSession::terminate_daemon_sessions() {
  return std::stoi(
      query("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name LIKE 'pgjobd%' AND datname = current_database() "
            "AND pid <> pg_backend_pid()"));
}

std::optional<double> cpu_seconds(pid_t pid) {
  const auto fields = stat_fields(pid);
  if (fields.size() < 13) return std::nullopt;
  const double ticks = static_cast<double>(std::stoll(fields[11]) + std::stoll(fields[12]));
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::vector<pid_t> child_pids(pid_t parent, bool zombies_only) {
  std::vector<pid_t> children;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    const auto fields = stat_fields(pid);
    if (fields.size() < 2 || std::stol(fields[1]) != parent) continue;
    if (zombies_only && fields[0] != "Z") continue;
    children.push_back(pid);
  }
  return children;
}

std::map<std::int64_t, int> id_counts(const std::string& path) {
  std::map<std::int64_t, int> counts;
  for (const std::string& line : read_lines(path)) {
    if (line.empty()) continue;
    ++counts[std::stoll(line)];
  }
  return counts;
}

}  // namespace pgjobd::testing
