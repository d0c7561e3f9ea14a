// hop_bench: the one-way latency of one pipeline hop between two processes
// on this host, through the project's transport and through raw ZeroMQ and
// raw TCP, so the cost the transport adds can be told from what ZeroMQ and
// the kernel cost.
//
//   hop_bench [--mode transport|pair|tcp] [--curve 1|0] [--bytes N]
//             [--hops N] [--gap-us N] [--gap sleep|spin] [--poll worker|one]
//             [--parse 1|0] [--pin 0|1] [--ipc 0|1]
//
// Two processes (this one and a fork) pass one frame back and forth over
// tcp loopback; each hop's latency is the receiver's CLOCK_MONOTONIC when
// the frame is off the socket minus the sender's just before its send call
// (one clock for the host). Each side then waits --gap-us before sending
// it back: sleeping (an idle stage) or spinning (a computing stage), as a
// pipeline stage does between its input and its output.
//
//   transport: each side binds a wire::Server (ROUTER) and connects a
//              wire::Client (DEALER, identity, TransportOptions) to the
//              other's, as a worker's next-hop link is set up; CURVE with a
//              ZAP allow-list unless --curve 0. --poll worker waits as the
//              worker's loop does (its ROUTER, an eventfd, its DEALER; then
//              Receive(0)); --poll one waits in Server::Receive. --parse 1
//              marshals a HiddenFrame (576 floats; the digest included) per
//              hop and parses it after the receive time is taken.
//   pair:      one ZeroMQ PAIR socket each, no envelope (--curve applies).
//   tcp:       one TCP connection, TCP_NODELAY, blocking reads.
// --ipc 1: the ZeroMQ modes over ipc:// (unix sockets) instead of tcp.
// --pin 1: each process, its ZeroMQ I/O thread included, on its own core.
//
// Prints, for the hops each side received, p10 / median / p90 in
// microseconds and the process CPU time per hop (all its threads).
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "wire/hidden_frame.h"
#include "wire/link_security.h"
#include "wire/transport.h"

namespace lockstep::wire {
namespace {

struct Options {
  std::string mode = "transport";
  bool curve = true;
  size_t bytes = 0;  // 0: a marshalled one-row HiddenFrame's size
  int hops = 2000;
  int warmup = 100;
  long gap_us = 0;
  bool spin = false;
  bool worker_poll = true;
  bool parse = false;
  bool pin = false;  // each process (all its threads) on its own core
  bool ipc = false;  // ipc:// (unix sockets) instead of tcp loopback
};

uint64_t NowNs() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void Gap(const Options& o) {
  if (o.gap_us <= 0) return;
  if (!o.spin) {
    std::this_thread::sleep_for(std::chrono::microseconds(o.gap_us));
    return;
  }
  const uint64_t until = NowNs() + static_cast<uint64_t>(o.gap_us) * 1000u;
  while (NowNs() < until) {
  }
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "hop_bench: %s\n", what.c_str());
  std::exit(1);
}

HiddenFrame OneRow(uint64_t stamp) {
  HiddenFrame f;
  f.session_id = stamp;
  f.step = 1;
  f.seq = 1;
  f.hidden = 576;
  f.resume_layer = 10;
  f.payload.resize(576);
  for (size_t i = 0; i < f.payload.size(); ++i) f.payload[i] = static_cast<float>(i) * 0.25f;
  return f;
}

void PutStamp(std::vector<uint8_t>& frame, uint64_t stamp) {
  std::memcpy(frame.data() + frame.size() - 8, &stamp, 8);
}
uint64_t GetStamp(std::span<const uint8_t> bytes) {
  uint64_t stamp = 0;
  if (bytes.size() >= 8) std::memcpy(&stamp, bytes.data() + bytes.size() - 8, 8);
  return stamp;
}

// What both processes need of each other, passed over pipes before timing.
struct Peer {
  int in = -1, out = -1;  // pipe ends
  void Put(const std::string& s) const {
    const uint32_t n = static_cast<uint32_t>(s.size());
    if (write(out, &n, 4) != 4 || write(out, s.data(), n) != static_cast<ssize_t>(n)) Die("pipe");
  }
  std::string Get() const {
    uint32_t n = 0;
    if (read(in, &n, 4) != 4) Die("pipe");
    std::string s(n, '\0');
    size_t got = 0;
    while (got < n) {
      const ssize_t r = read(in, s.data() + got, n - got);
      if (r <= 0) Die("pipe");
      got += static_cast<size_t>(r);
    }
    return s;
  }
};

struct Report {
  std::vector<uint64_t> hops_ns;
  double cpu_s = 0;
};

void Print(const char* side, const Options& o, Report& r) {
  std::vector<uint64_t>& v = r.hops_ns;
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) { return static_cast<double>(v[static_cast<size_t>(q * (v.size() - 1))]) / 1000.0; };
  std::printf("%-5s mode=%s curve=%d poll=%s parse=%d bytes=%zu gap=%ldus(%s) hops=%zu  "
              "hop us p10 %.1f  median %.1f  p90 %.1f  cpu/hop %.1f us\n",
              side, o.mode.c_str(), o.curve ? 1 : 0, o.worker_poll ? "worker" : "one",
              o.parse ? 1 : 0, o.bytes, o.gap_us, o.spin ? "spin" : "sleep", v.size(), at(0.1),
              at(0.5), at(0.9), 1e6 * r.cpu_s / static_cast<double>(v.size()));
  std::fflush(stdout);
}

// ---- transport ---------------------------------------------------------------

struct TransportEnd {
  std::optional<Server> server;
  std::optional<Client> client;
  int eventfd_ = -1;
};

Result<Incoming> WaitAndReceive(TransportEnd& e, const Options& o) {
  if (!o.worker_poll) return e.server->Receive(std::chrono::milliseconds(5000));
  for (;;) {
    zmq_pollitem_t items[3] = {
        {e.server->socket().handle(), 0, ZMQ_POLLIN, 0},
        {nullptr, e.eventfd_, ZMQ_POLLIN, 0},
        {e.client->socket().handle(), -1, ZMQ_POLLIN, 0},
    };
    if (zmq_poll(items, 3, 50) < 0) return IoError("poll");
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    Result<Incoming> in = e.server->Receive(std::chrono::milliseconds(0));
    if (in.ok() || in.status().kind() != ErrorKind::kTimeout) return in;
  }
}

Report RunTransport(const Options& o, bool first, const Peer& peer) {
  zmq::context_t context(1);
  const CurveKeyPair own = GenerateCurveKeyPair().value();
  peer.Put(own.public_z85);
  const std::string other_key = peer.Get();
  TransportOptions server_options, client_options;
  server_options.security.insecure = client_options.security.insecure = !o.curve;
  server_options.security.own = client_options.security.own = own;
  server_options.security.allowed_clients_z85 = {other_key};
  client_options.security.server_public_z85 = other_key;
  TransportEnd e;
  const std::string endpoint = o.ipc ? "ipc:///tmp/hop_bench-" + std::to_string(getpid())
                                     : "tcp://127.0.0.1:*";
  Result<Server> server = Server::Bind(context, endpoint, server_options);
  if (!server.ok()) Die(server.status().ToString());
  e.server.emplace(std::move(server).value());
  peer.Put(e.server->endpoint());
  Result<Client> client = Client::Connect(context, peer.Get(), UnguessableIdentity("stage"),
                                          client_options);
  if (!client.ok()) Die(client.status().ToString());
  e.client.emplace(std::move(client).value());
  e.eventfd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

  std::vector<uint8_t> fixed = MarshalHidden(OneRow(0));
  if (o.bytes > 0) fixed.resize(std::max<size_t>(o.bytes, 8));
  const auto send = [&] {
    if (o.parse) {
      Frame f = MarshalHidden(OneRow(NowNs()));
      if (!e.client->Send(f).ok()) Die("send");
      return;
    }
    PutStamp(fixed, NowNs());
    if (!e.client->Send(fixed).ok()) Die("send");
  };
  Report r;
  const int total = o.warmup + o.hops;
  if (first) send();
  double cpu0 = 0;
  for (int i = 0; i < total; ++i) {
    if (i == o.warmup) cpu0 = CpuSeconds();
    Result<Incoming> in = WaitAndReceive(e, o);
    const uint64_t now = NowNs();
    if (!in.ok()) Die(in.status().ToString());
    uint64_t stamp = 0;
    if (o.parse) {
      Result<HiddenFrame> h = UnmarshalHidden(in->bytes());
      if (!h.ok()) Die(h.status().ToString());
      stamp = h->session_id;
    } else {
      stamp = GetStamp(in->bytes());
    }
    if (i >= o.warmup) r.hops_ns.push_back(now - stamp);
    if (first && i == total - 1) break;  // the last hop is the first side's
    Gap(o);
    send();
  }
  r.cpu_s = CpuSeconds() - cpu0;
  close(e.eventfd_);
  return r;
}

// ---- raw ZeroMQ PAIR -------------------------------------------------------------

Report RunPair(const Options& o, bool first, const Peer& peer) {
  zmq::context_t context(1);
  zmq::socket_t s(context, zmq::socket_type::pair);
  s.set(zmq::sockopt::linger, 1000);
  const CurveKeyPair own = GenerateCurveKeyPair().value();
  peer.Put(own.public_z85);
  const std::string other_key = peer.Get();
  if (first) {
    if (o.curve) {
      s.set(zmq::sockopt::curve_server, 1);
      s.set(zmq::sockopt::curve_secretkey, own.secret_z85);
    }
    s.bind(o.ipc ? "ipc:///tmp/hop_bench-" + std::to_string(getpid()) : "tcp://127.0.0.1:*");
    peer.Put(s.get(zmq::sockopt::last_endpoint));
  } else {
    if (o.curve) {
      s.set(zmq::sockopt::curve_serverkey, other_key);
      s.set(zmq::sockopt::curve_publickey, own.public_z85);
      s.set(zmq::sockopt::curve_secretkey, own.secret_z85);
    }
    s.connect(peer.Get());
  }
  std::vector<uint8_t> buf(o.bytes > 0 ? std::max<size_t>(o.bytes, 8) : 2400);
  Report r;
  const int total = o.warmup + o.hops;
  const auto send = [&] {
    PutStamp(buf, NowNs());
    s.send(zmq::buffer(buf.data(), buf.size()), zmq::send_flags::none);
  };
  if (first) send();
  double cpu0 = 0;
  for (int i = 0; i < total; ++i) {
    if (i == o.warmup) cpu0 = CpuSeconds();
    zmq::message_t m;
    if (!s.recv(m)) Die("recv");
    const uint64_t now = NowNs();
    if (i >= o.warmup) {
      r.hops_ns.push_back(now - GetStamp({static_cast<const uint8_t*>(m.data()), m.size()}));
    }
    if (first && i == total - 1) break;
    Gap(o);
    send();
  }
  r.cpu_s = CpuSeconds() - cpu0;
  return r;
}

// ---- raw TCP -------------------------------------------------------------------

void ReadFull(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) Die("tcp read");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

Report RunTcp(const Options& o, bool first, const Peer& peer) {
  int fd = -1;
  if (first) {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(listener, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      Die("tcp listen");
    }
    peer.Put(std::to_string(ntohs(a.sin_port)));
    fd = accept(listener, nullptr, nullptr);
    close(listener);
  } else {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(std::stoi(peer.Get())));
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("tcp connect");
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<uint8_t> buf(o.bytes > 0 ? std::max<size_t>(o.bytes, 8) : 2400);
  Report r;
  const int total = o.warmup + o.hops;
  const auto send = [&] {
    PutStamp(buf, NowNs());
    if (write(fd, buf.data(), buf.size()) != static_cast<ssize_t>(buf.size())) Die("tcp write");
  };
  if (first) send();
  double cpu0 = 0;
  for (int i = 0; i < total; ++i) {
    if (i == o.warmup) cpu0 = CpuSeconds();
    ReadFull(fd, buf.data(), buf.size());
    const uint64_t now = NowNs();
    if (i >= o.warmup) r.hops_ns.push_back(now - GetStamp(buf));
    if (first && i == total - 1) break;
    Gap(o);
    send();
  }
  r.cpu_s = CpuSeconds() - cpu0;
  close(fd);
  return r;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], v = argv[i + 1];
    if (flag == "--mode") o.mode = v;
    else if (flag == "--curve") o.curve = v != "0";
    else if (flag == "--bytes") o.bytes = std::stoul(v);
    else if (flag == "--hops") o.hops = std::stoi(v);
    else if (flag == "--gap-us") o.gap_us = std::stol(v);
    else if (flag == "--gap") o.spin = v == "spin";
    else if (flag == "--poll") o.worker_poll = v == "worker";
    else if (flag == "--parse") o.parse = v != "0";
    else if (flag == "--pin") o.pin = v != "0";
    else if (flag == "--ipc") o.ipc = v != "0";
    else Die("unknown flag " + flag);
  }
  if (o.mode != "transport" && o.mode != "pair" && o.mode != "tcp") Die("unknown --mode " + o.mode);
  if (o.hops < 1) Die("--hops must be >= 1");
  if (o.bytes == 0) o.bytes = MarshalHidden(OneRow(0)).size();
  return o;
}

int Main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  int a[2], b[2];
  if (pipe(a) != 0 || pipe(b) != 0) Die("pipe");
  std::fflush(stdout);
  const pid_t child = fork();  // before any ZeroMQ context exists
  if (child < 0) Die("fork");
  const bool first = child != 0;
  const Peer peer = first ? Peer{b[0], a[1]} : Peer{a[0], b[1]};
  if (o.pin) {  // before the context starts its I/O thread, which inherits it
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(first ? 0 : 1, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) Die("sched_setaffinity");
  }
  Report r = o.mode == "transport" ? RunTransport(o, first, peer)
             : o.mode == "pair"    ? RunPair(o, first, peer)
                                   : RunTcp(o, first, peer);
  if (!first) {
    Print("B", o, r);
    return 0;
  }
  int status = 0;
  waitpid(child, &status, 0);
  Print("A", o, r);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace
}  // namespace lockstep::wire

int main(int argc, char** argv) { return lockstep::wire::Main(argc, argv); }
