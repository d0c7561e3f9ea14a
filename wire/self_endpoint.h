// Whether a connect endpoint reaches a socket this process has bound: a
// worker refuses an assignment whose next hop is itself under another
// name (a forwarding loop), e.g. tcp://localhost:5555 for a worker bound to
// tcp://127.0.0.1:5555 or to every interface.
//
// Stateless; thread-safe. Host names are resolved (getaddrinfo), which may
// ask the system's resolver.
#pragma once

#include <string>

namespace lockstep::wire {

// True when connecting to `endpoint` reaches `bound`, a resolved endpoint
// of a socket bound in this process (wire::Server::endpoint()):
//   tcp:    the same port, and a host that resolves to the bound address;
//           when bound to every interface (0.0.0.0, ::), to any address
//           of this host (a loopback address or one of its interfaces');
//   ipc:    the same file (device and inode), or the same path when
//           either is missing;
//   inproc: the same name.
// A host that does not resolve reaches nothing (false): connecting to it
// fails later, naming it.
bool ReachesListener(const std::string& endpoint, const std::string& bound);

}  // namespace lockstep::wire
