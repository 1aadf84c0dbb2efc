// NetnsLink (ip netns, a veth pair) and Blackhole (tc netem, or nftables at both ingresses).

#include "support/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/private_cluster.hpp"

namespace pgjobd::testing {
namespace {

constexpr const char* kNamespacePrefix = "pgjobd-bh-";
// /30s are carved from this /16: 16,384 links, one per index.
constexpr int kLinkIndexes = 16384;

std::string joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const auto& word : argv) text += (text.empty() ? "" : " ") + word;
  return text;
}

CommandResult run_checked(const std::vector<std::string>& argv) {
  CommandResult result = run_command(argv, {}, std::chrono::seconds(30));
  if (result.exit_code != 0) {
    throw std::runtime_error(joined(argv) + " failed with exit code " +
                             std::to_string(result.exit_code) + ": " + result.out);
  }
  return result;
}

bool process_exists(long pid) { return std::filesystem::exists("/proc/" + std::to_string(pid)); }

// The pid in NAME = PREFIX<pid>-<n>, or 0.
long owner_pid(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return 0;
  try {
    return std::stol(name.substr(prefix.size()));
  } catch (const std::exception&) {
    return 0;
  }
}

// The nftables table of a link's blackhole: its namespace's name in nft's identifier syntax.
std::string nft_table(const NetnsLink& link) {
  std::string table = link.name();
  for (char& c : table) c = c == '-' ? '_' : c;
  return table;
}

// Namespaces (and with them their veth ends, which take their peers along) and nftables
// tables left by test processes that are gone: a test killed by its timeout runs no
// destructor.
void remove_leftovers() {
  std::istringstream namespaces(run_command({"ip", "netns", "list"}).out);
  for (std::string line; std::getline(namespaces, line);) {
    const std::string name = line.substr(0, line.find(' '));
    const long pid = owner_pid(name, kNamespacePrefix);
    if (pid > 0 && !process_exists(pid)) run_command({"ip", "netns", "del", name});
  }
  std::istringstream tables(run_command({"nft", "list", "tables", "netdev"}).out);
  std::string table_prefix = kNamespacePrefix;
  for (char& c : table_prefix) c = c == '-' ? '_' : c;
  for (std::string line; std::getline(tables, line);) {
    const std::string name = line.substr(line.rfind(' ') + 1);
    const long pid = owner_pid(name, table_prefix);
    if (pid > 0 && !process_exists(pid)) run_command({"nft", "delete", "table", "netdev", name});
  }
}

std::string octets(int index, int host) {
  return "10.213." + std::to_string(index / 64) + "." + std::to_string(index % 64 * 4 + host);
}

}  // namespace

std::string NetnsLink::unavailable_reason() {
  if (geteuid() != 0) return "network namespaces need root";
  const CommandResult ip = run_command({"ip", "netns", "list"});
  if (ip.exit_code != 0) return "`ip netns list` failed (iproute2 missing?): " + ip.out;
  return "";
}

NetnsLink::NetnsLink() {
  remove_leftovers();
  static int made = 0;
  const int serial = made++;
  const long pid = getpid();
  name_ = kNamespacePrefix + std::to_string(pid) + "-" + std::to_string(serial);
  run_checked({"ip", "netns", "add", name_});
  try {
    // The veth name claims the index: `ip link add` fails when another process holds it.
    std::string last_error;
    for (int attempt = 0; attempt < 32 && host_device_.empty(); ++attempt) {
      const int index = static_cast<int>((pid * 31 + serial * 7 + attempt) % kLinkIndexes);
      const std::string host = "pjbh" + std::to_string(index);
      const CommandResult added =
          run_command({"ip", "link", "add", host, "type", "veth", "peer", "name", host + "n"});
      if (added.exit_code != 0) {
        last_error = added.out;
        continue;
      }
      host_device_ = host;
      peer_device_ = host + "n";
      host_address_ = octets(index, 1);
      peer_address_ = octets(index, 2);
      subnet_ = octets(index, 0) + "/30";
    }
    if (host_device_.empty()) throw std::runtime_error("cannot add a veth pair: " + last_error);
    run_checked({"ip", "link", "set", peer_device_, "netns", name_});
    run_checked({"ip", "addr", "add", host_address_ + "/30", "dev", host_device_});
    run_checked({"ip", "link", "set", host_device_, "up"});
    const auto inside = exec_prefix();
    const auto in_namespace = [&inside](std::vector<std::string> argv) {
      argv.insert(argv.begin(), inside.begin(), inside.end());
      run_checked(argv);
    };
    in_namespace({"ip", "addr", "add", peer_address_ + "/30", "dev", peer_device_});
    in_namespace({"ip", "link", "set", peer_device_, "up"});
    in_namespace({"ip", "link", "set", "lo", "up"});
  } catch (...) {
    if (!host_device_.empty()) run_command({"ip", "link", "del", host_device_});
    run_command({"ip", "netns", "del", name_});
    throw;
  }
}

NetnsLink::~NetnsLink() {
  // Deleting one end of a veth pair deletes the other; the namespace goes with its last user.
  run_command({"ip", "link", "del", host_device_});
  run_command({"ip", "netns", "del", name_});
}

std::vector<std::string> NetnsLink::exec_prefix() const { return {"ip", "netns", "exec", name_}; }

void NetnsLink::enter_on_this_thread() const {
  const std::string path = "/run/netns/" + name_;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
  const int entered = ::setns(fd, CLONE_NEWNET);
  const int error = errno;
  ::close(fd);
  if (entered != 0) throw std::runtime_error("setns " + path + ": " + std::strerror(error));
}

void NetnsLink::run_inside(const std::function<void()>& fn) const {
  std::exception_ptr failure;
  std::thread([&] {
    try {
      enter_on_this_thread();
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  }).join();
  if (failure) std::rethrow_exception(failure);
}

bool Blackhole::available(const NetnsLink& link, Method& method, std::string& why_not) {
  const CommandResult netem = run_command(
      {"tc", "qdisc", "add", "dev", link.host_device(), "root", "netem", "delay", "0ms"});
  if (netem.exit_code == 0) {
    run_command({"tc", "qdisc", "del", "dev", link.host_device(), "root"});
    method = Method::kNetem;
    return true;
  }
  try {
    Blackhole probe(link, Method::kNftables);
    method = Method::kNftables;
    return true;
  } catch (const std::exception& e) {
    why_not = "tc netem: " + netem.out + "; nftables: " + e.what();
    return false;
  }
}

Blackhole::Blackhole(const NetnsLink& link, Method method) : link_(link), method_(method) {
  const auto inside = link_.exec_prefix();
  const auto on_both_ends =
      [&](const std::function<std::vector<std::string>(const std::string&)>& command) {
        run_checked(command(link_.host_device()));
        std::vector<std::string> argv = command(link_.peer_device());
        argv.insert(argv.begin(), inside.begin(), inside.end());
        run_checked(argv);
      };
  engaged_ = true;
  try {
    if (method_ == Method::kNetem) {
      on_both_ends([](const std::string& device) {
        return std::vector<std::string>{"tc",   "qdisc", "add",  "dev", device,
                                        "root", "netem", "loss", "100%"};
      });
    } else {
      const std::string table = nft_table(link_);
      on_both_ends([&table](const std::string& device) {
        return std::vector<std::string>{
            "nft", "add table netdev " + table + "; add chain netdev " + table +
                       " drop_ipv4 { type filter hook ingress device \"" + device +
                       "\" priority 0; policy accept; }; add rule netdev " + table +
                       " drop_ipv4 meta protocol ip drop"};
      });
    }
  } catch (...) {
    lift();
    throw;
  }
}

Blackhole::~Blackhole() { lift(); }

void Blackhole::lift() {
  if (!engaged_) return;
  engaged_ = false;
  std::vector<std::string> host_side;
  std::vector<std::string> peer_side = link_.exec_prefix();
  if (method_ == Method::kNetem) {
    host_side = {"tc", "qdisc", "del", "dev", link_.host_device(), "root"};
    peer_side.insert(peer_side.end(), {"tc", "qdisc", "del", "dev", link_.peer_device(), "root"});
  } else {
    host_side = {"nft", "delete", "table", "netdev", nft_table(link_)};
    peer_side.insert(peer_side.end(), host_side.begin(), host_side.end());
  }
  run_command(host_side);
  run_command(peer_side);
}

const char* Blackhole::describe(Method method) {
  return method == Method::kNetem ? "tc netem loss 100% on both veth ends"
                                  : "nftables drop of every IPv4 packet at both veth ingresses";
}

}  // namespace pgjobd::testing
