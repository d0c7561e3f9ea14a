// Test helper: K worker processes of a given binary (the shipped
// `lockstep`, or the test-only fault-injecting worker) on loopback CURVE
// links, and a cluster config file naming them, for `lockstep coordinator
// --config` and `lockstep verify --config`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/worker_processes.h"

namespace lockstep::testing {

struct TestCluster {
  std::unique_ptr<runtime::WorkerProcesses> procs;
  std::string config_path;
  std::vector<std::string> worker_curve_public;  // Z85, read from the .pub files
};

// Spawns `count` workers of `exe` and writes DIR/cluster.json for `model`
// with plan `plan` ([[lo,hi],...] text). Fails the test on error.
TestCluster StartTestCluster(const std::string& exe, int count, const std::string& dir,
                             const std::string& model, const std::string& plan);

}  // namespace lockstep::testing
