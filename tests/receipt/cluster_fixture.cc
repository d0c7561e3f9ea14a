#include "cluster_fixture.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "keys/identity.h"

namespace lockstep::testing {

TestCluster StartTestCluster(const std::string& exe, int count, const std::string& dir,
                             const std::string& model, const std::string& plan) {
  TestCluster c;
  runtime::WorkerSpawnOptions o;
  o.exe = exe;
  o.count = count;
  auto procs = runtime::WorkerProcesses::Spawn(o);
  EXPECT_TRUE(procs.ok()) << procs.status().ToString();
  if (!procs.ok()) return c;
  c.procs = std::move(procs).value();
  nlohmann::json cfg;
  cfg["model"] = model;
  cfg["workers"] = c.procs->endpoints();
  cfg["plan"] = nlohmann::json::parse(plan);
  cfg["key"] = c.procs->coordinator_key_file();
  cfg["worker_keys"] = c.procs->worker_public_key_files();
  for (const std::string& f : c.procs->worker_public_key_files()) {
    auto pub = keys::ReadPublicIdentity(f);
    EXPECT_TRUE(pub.ok()) << pub.status().ToString();
    if (pub.ok()) c.worker_curve_public.push_back(pub->curve_public_z85);
  }
  c.config_path = dir + "/cluster.json";
  std::ofstream(c.config_path) << cfg.dump(2);
  return c;
}

}  // namespace lockstep::testing
