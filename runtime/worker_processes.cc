#include "runtime/worker_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "base/json.h"
#include "keys/identity.h"

namespace lockstep::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kReadyFd = 3;  // the child's readiness descriptor

// Reads up to the first newline from `fd` before `deadline`.
Result<std::string> ReadLine(int fd, Clock::time_point deadline, const std::string& who) {
  std::string line;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{fd, POLLIN, 0};
    if (left <= 0 || poll(&pfd, 1, static_cast<int>(left)) <= 0) {
      return TimeoutError(who + " did not report readiness in time");
    }
    char buf[256];
    const ssize_t got = read(fd, buf, sizeof buf);
    if (got <= 0) return DisconnectedError(who + " exited before reporting readiness");
    line.append(buf, static_cast<size_t>(got));
    if (line.size() > 4096) return CorruptError(who + ": readiness line longer than 4096 bytes");
  }
  line.resize(line.find('\n'));
  return line;
}

// The endpoint of a readiness line, checked against what the child must say.
Result<std::string> ParseReady(const std::string& line, const std::string& listen,
                               const std::string& key, pid_t pid, const std::string& who) {
  Result<nlohmann::json> parsed = ParseJsonStrict(line, who + ": readiness line", ErrorKind::kCorrupt);
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json& j = *parsed;
  if (!j.is_object() || !j.contains("endpoint") || !j["endpoint"].is_string() ||
      !j.contains("curve_public") || !j["curve_public"].is_string() || !j.contains("pid") ||
      !j["pid"].is_number_integer()) {
    return CorruptError(who + ": readiness line is not {endpoint, curve_public, pid}: " + line);
  }
  const std::string endpoint = j["endpoint"];
  if (endpoint != listen) {
    return CorruptError(who + ": endpoint '" + endpoint + "' is not the one it was given, '" +
                        listen + "'");
  }
  if (j["curve_public"] != key) return MismatchError(who + ": reports another CURVE key");
  if (j["pid"] != pid) return MismatchError(who + ": reports pid " + j["pid"].dump());
  return endpoint;
}

}  // namespace

std::string SelfExe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("lockstep") : p.string();
}

Result<std::unique_ptr<WorkerProcesses>> WorkerProcesses::Spawn(const WorkerSpawnOptions& o) {
  if (o.count < 1) return InvalidError("need at least one worker process");
  if (o.spares < 0) return InvalidError("a negative number of spare workers");
  std::unique_ptr<WorkerProcesses> p(new WorkerProcesses());
  p->options_ = o;
  const int total = o.count + o.spares;
  LOCKSTEP_RETURN_IF_ERROR(p->MakeKeys(total));
  p->children_.assign(static_cast<size_t>(total), -1);
  for (int i = 0; i < total; ++i) {
    // A unix socket in the private key directory: the same CURVE links
    // and allow-lists as tcp, and a shorter kernel path per hop than
    // loopback TCP (docs/performance.md, "What one hop costs").
    const std::string listen = "ipc://" + p->key_dir_ + "/w" + std::to_string(i) + ".sock";
    LOCKSTEP_ASSIGN_OR_RETURN(std::string endpoint, p->SpawnOne(o, i, listen));
    p->endpoints_.push_back(std::move(endpoint));
  }
  return p;
}

Status WorkerProcesses::MakeKeys(int count) {
  char dir[] = "/tmp/lockstep-keys-XXXXXX";
  if (mkdtemp(dir) == nullptr) return IoError("mkdtemp: cannot make a private key directory");
  key_dir_ = dir;  // mkdtemp makes it 0700
  for (int i = -1; i < count; ++i) {
    LOCKSTEP_ASSIGN_OR_RETURN(keys::Identity id, keys::GenerateIdentity());
    const std::string path = i < 0 ? coordinator_key_file() : key_dir_ + "/w" + std::to_string(i);
    LOCKSTEP_RETURN_IF_ERROR(keys::WriteIdentity(id, path));
    if (i < 0) {
      coordinator_key_ = {id.pub.curve_public_z85, id.curve_secret_z85};
    } else {
      worker_keys_.push_back(id.pub.curve_public_z85);
    }
  }
  return Status::Ok();
}

std::vector<std::string> WorkerProcesses::worker_public_key_files() const {
  std::vector<std::string> files;
  for (size_t i = 0; i < worker_keys_.size(); ++i) {
    files.push_back(key_dir_ + "/w" + std::to_string(i) + ".pub");
  }
  return files;
}

void WorkerProcesses::ApplyTo(ClusterConfig* cfg) const {
  const auto count = static_cast<size_t>(options_.count);
  cfg->workers.assign(endpoints_.begin(), endpoints_.begin() + count);
  cfg->insecure = false;
  cfg->key = coordinator_key_;
  cfg->worker_keys.assign(worker_keys_.begin(), worker_keys_.begin() + count);
  cfg->spares.clear();
  for (size_t i = count; i < endpoints_.size(); ++i) {
    cfg->spares.push_back(SpareWorker{endpoints_[i], worker_keys_[i]});
  }
}

std::vector<std::string> WorkerProcesses::Args(const WorkerSpawnOptions& o, int index,
                                               const std::string& listen) const {
  std::vector<std::string> args = {o.exe, "worker", "--listen", listen,
                                   "--key", key_dir_ + "/w" + std::to_string(index),
                                   "--allow", coordinator_key_file() + ".pub",
                                   "--threads", std::to_string(o.compute.threads),
                                   "--isa", o.compute.isa,
                                   "--ready-fd", std::to_string(kReadyFd)};
  for (const std::string& a : o.extra_allow) {
    args.push_back("--allow");
    args.push_back(a);
  }
  if (!o.compute.weight_cache.empty()) {  // each stage keys its own file there
    args.push_back("--weight-cache");
    args.push_back(o.compute.weight_cache);
  }
  return args;
}

Result<std::string> WorkerProcesses::SpawnOne(const WorkerSpawnOptions& o, int index,
                                              const std::string& listen) {
  // Everything is prepared before fork: the child only makes
  // async-signal-safe calls until exec.
  std::vector<std::string> args = Args(o, index, listen);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull < 0) return IoError("open /dev/null: cannot spawn a worker");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    close(devnull);
    return IoError("pipe: cannot spawn a worker");
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(devnull, STDOUT_FILENO);
    if (fds[1] == kReadyFd) {
      fcntl(kReadyFd, F_SETFD, 0);  // keep it across exec
    } else {
      dup2(fds[1], kReadyFd);  // the copy has no FD_CLOEXEC
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    execv(o.exe.c_str(), argv.data());
    _exit(127);
  }
  close(devnull);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return IoError("fork: cannot spawn a worker");
  }
  children_[static_cast<size_t>(index)] = pid;
  const std::string who = "worker process " + std::to_string(pid) + " (" + o.exe + ")";
  Result<std::string> line = ReadLine(fds[0], Clock::now() + o.ready_timeout, who);
  close(fds[0]);
  if (!line.ok()) return line.status();
  return ParseReady(*line, listen, worker_keys_[static_cast<size_t>(index)], pid, who);
}

void WorkerProcesses::Kill(size_t i) {
  pid_t& pid = children_[i];
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  pid = -1;
}

Status WorkerProcesses::Restart(size_t i) {
  if (i >= endpoints_.size()) return InvalidError("no worker process " + std::to_string(i));
  Kill(i);
  LOCKSTEP_ASSIGN_OR_RETURN(std::string endpoint,
                            SpawnOne(options_, static_cast<int>(i), endpoints_[i]));
  if (endpoint != endpoints_[i]) {
    return MismatchError("restarted worker listens on " + endpoint + ", not " + endpoints_[i]);
  }
  return Status::Ok();
}

void WorkerProcesses::Reap(milliseconds grace) {
  const auto deadline = Clock::now() + grace;
  for (pid_t& pid : children_) {
    while (pid > 0) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
      } else if (Clock::now() >= deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(milliseconds(10));
      }
    }
  }
}

WorkerProcesses::~WorkerProcesses() {
  for (size_t i = 0; i < children_.size(); ++i) Kill(i);
  if (!key_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(key_dir_, ec);
  }
}

}  // namespace lockstep::runtime
