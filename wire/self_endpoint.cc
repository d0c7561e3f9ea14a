#include "wire/self_endpoint.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

namespace lockstep::wire {
namespace {

bool Strip(const std::string& s, const char* prefix, std::string* rest) {
  const size_t n = std::strlen(prefix);
  if (s.compare(0, n, prefix) != 0) return false;
  *rest = s.substr(n);
  return true;
}

// An IP address; IPv4-mapped IPv6 addresses are kept as IPv4.
struct Address {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};
  bool operator==(const Address&) const = default;
  bool Wildcard() const {
    return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
  }
  bool Loopback() const {
    if (!v6) return bytes[0] == 127;
    return std::all_of(bytes.begin(), bytes.begin() + 15, [](uint8_t b) { return b == 0; }) &&
           bytes[15] == 1;
  }
};

std::optional<Address> FromSockaddr(const sockaddr* sa) {
  if (sa == nullptr) return std::nullopt;
  Address a;
  if (sa->sa_family == AF_INET) {
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    return a;
  }
  if (sa->sa_family != AF_INET6) return std::nullopt;
  const auto* in6 = &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(in6)) {
    std::memcpy(a.bytes.data(), in6->s6_addr + 12, 4);
    return a;
  }
  a.v6 = true;
  std::memcpy(a.bytes.data(), in6->s6_addr, 16);
  return a;
}

std::vector<Address> Resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::vector<Address> out;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return out;
  for (const addrinfo* p = found; p != nullptr; p = p->ai_next) {
    if (std::optional<Address> a = FromSockaddr(p->ai_addr)) out.push_back(*a);
  }
  freeaddrinfo(found);
  return out;
}

// An address of this host: loopback, the wildcard (a connection to it
// reaches this host) or one of its interfaces'.
bool IsLocal(const Address& a) {
  if (a.Loopback() || a.Wildcard()) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool local = false;
  for (const ifaddrs* i = list; i != nullptr && !local; i = i->ifa_next) {
    const std::optional<Address> mine = FromSockaddr(i->ifa_addr);
    local = mine && *mine == a;
  }
  freeifaddrs(list);
  return local;
}

struct HostPort {
  std::string host;
  long port = -1;
};

std::optional<HostPort> SplitTcp(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  HostPort hp{address.substr(0, colon), -1};
  const std::string port = address.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  hp.port = std::stol(port);
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  }
  return hp;
}

bool TcpReaches(const std::string& connect, const std::string& bound) {
  const std::optional<HostPort> to = SplitTcp(connect), at = SplitTcp(bound);
  if (!to || !at || to->port != at->port) return false;
  const std::vector<Address> bound_at = Resolve(at->host == "*" ? "0.0.0.0" : at->host);
  if (bound_at.empty()) return false;
  for (const Address& a : Resolve(to->host)) {
    for (const Address& b : bound_at) {
      if (b.Wildcard() ? IsLocal(a) : (a == b || (a.Wildcard() && b.Loopback()))) return true;
    }
  }
  return false;
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  std::error_code ec;
  const auto norm = [&](const std::string& p) {
    return std::filesystem::absolute(p, ec).lexically_normal();
  };
  return norm(a) == norm(b);
}

}  // namespace

bool ReachesListener(const std::string& endpoint, const std::string& bound) {
  std::string to, at;
  if (Strip(endpoint, "tcp://", &to) && Strip(bound, "tcp://", &at)) return TcpReaches(to, at);
  if (Strip(endpoint, "ipc://", &to) && Strip(bound, "ipc://", &at)) {
    if (to.empty() || at.empty()) return false;
    if (to[0] == '@' || at[0] == '@') return to == at;  // the abstract namespace
    return SameFile(to, at);
  }
  if (Strip(endpoint, "inproc://", &to) && Strip(bound, "inproc://", &at)) return to == at;
  return false;
}

}  // namespace lockstep::wire
