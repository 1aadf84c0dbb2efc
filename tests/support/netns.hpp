#pragma once
// Fault-test support for network faults: a network namespace of the test's own joined to the
// root namespace by a veth pair on a private /30, so a daemon run inside it (exec_prefix())
// reaches a server only through a link the test can break; and a blackhole on that link,
// which drops every packet without a reset, as a dead router or a firewall does.

#include <functional>
#include <string>
#include <vector>

namespace pgjobd::testing {

// `ip netns add`, a veth pair with one end moved into the namespace, 10.213.X.Y/30 on both
// ends (the root side the first host address, the namespace side the second), both up, and
// the namespace's loopback up. Its names carry this process's id: a namespace left behind
// by a test process that died is removed by the next one made. The destructor removes the
// namespace and the pair, whatever state the test left them in. Needs root.
class NetnsLink {
 public:
  NetnsLink();
  ~NetnsLink();
  NetnsLink(const NetnsLink&) = delete;
  NetnsLink& operator=(const NetnsLink&) = delete;

  // Why a link cannot be made here ("" when it can): not root, no `ip`, no netns support.
  static std::string unavailable_reason();

  const std::string& name() const { return name_; }
  const std::string& host_device() const { return host_device_; }  // root side
  const std::string& peer_device() const { return peer_device_; }  // namespace side
  const std::string& host_address() const { return host_address_; }
  const std::string& peer_address() const { return peer_address_; }
  // The /30 both addresses are on, e.g. 10.213.7.4/30.
  const std::string& subnet() const { return subnet_; }
  // `ip netns exec NAME`: a command after it runs inside the namespace, in the same process
  // (ip execs it), so its pid and signals are the command's own.
  std::vector<std::string> exec_prefix() const;
  // Moves the calling thread into the namespace: the sockets it opens from then on (an HTTP
  // client's) live there. Only for a thread the caller made for this and ends afterwards.
  void enter_on_this_thread() const;
  // Runs `fn` on a new thread inside the namespace and waits for it (exceptions pass on).
  void run_inside(const std::function<void()>& fn) const;

 private:
  std::string name_;
  std::string host_device_;
  std::string peer_device_;
  std::string host_address_;
  std::string peer_address_;
  std::string subnet_;
};

// Every IPv4 packet on a NetnsLink dropped in both directions, silently: neither end gets a
// reset or an error, its TCP retransmits into the void. `tc qdisc ... netem loss 100%` on
// both ends where the kernel has sch_netem; else nftables rules at the ingress of both ends
// (a packet the sender handed to the link vanishes, as with netem; a drop at the sender's
// own egress would be reported to its TCP as local congestion, which TCP treats
// differently). The destructor lifts it.
class Blackhole {
 public:
  enum class Method { kNetem, kNftables };

  // Whether this machine supports one, found by trying netem, then nftables, on `link`
  // (`method` is then the first that works); else false and the reason in `why_not`.
  static bool available(const NetnsLink& link, Method& method, std::string& why_not);

  Blackhole(const NetnsLink& link, Method method);  // engages it
  ~Blackhole();
  Blackhole(const Blackhole&) = delete;
  Blackhole& operator=(const Blackhole&) = delete;

  // Lets packets through again (idempotent).
  void lift();
  static const char* describe(Method method);

 private:
  const NetnsLink& link_;
  const Method method_;
  bool engaged_ = false;
};

}  // namespace pgjobd::testing
