// Eight coordinators, each with its own allowed key, start at once on the
// same three worker processes: each either decodes with the digests of its
// solo run or is refused with an error that names the cause (busy, naming
// the holder); none gets a wrong result or a bare timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <filesystem>

#include "cli_runner.h"
#include "engine/ops/fp_env.h"
#include "keys/identity.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

TEST(ManyCoordinators, EachSucceedsExactlyOrIsRefusedByName) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string model = MakeModel("many-coordinators", 6, 61);
  constexpr int kCoordinators = 8;
  const std::string dir = MakeTempDir("many-coordinators");
  std::vector<wire::CurveKeyPair> keys;
  std::vector<std::string> allow;
  for (int i = 1; i < kCoordinators; ++i) {
    const keys::Identity id = keys::GenerateIdentity().value();
    const std::string file = dir + "/c" + std::to_string(i);
    ASSERT_TRUE(keys::WriteIdentity(id, file).ok());
    keys.push_back({id.pub.curve_public_z85, id.curve_secret_z85});
    allow.push_back(file + ".pub");
  }
  auto procs = SpawnWorkerProcesses(3, allow);
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  ClusterConfig cfg;
  (*procs)->ApplyTo(&cfg);
  cfg.model_dir = model;
  cfg.heartbeat = 100ms;
  cfg.liveness = 20;
  cfg.request_timeout = 20s;
  keys.insert(keys.begin(), cfg.key);  // coordinator 0: the key the workers were made for
  std::vector<DecodeRequest> reqs(kCoordinators);
  for (int i = 0; i < kCoordinators; ++i) {
    reqs[i].prompt = {static_cast<uint32_t>(10 + i), 3, 5};
    reqs[i].gen = 6;
  }
  std::vector<Result<DecodeResult>> got(kCoordinators, InvalidError("not run"));
  zmq::context_t context(1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCoordinators; ++i) {
    threads.emplace_back([&, i] {
      ClusterConfig mine = cfg;
      mine.key = keys[static_cast<size_t>(i)];
      auto c = Coordinator::Start(context, mine);
      if (!c.ok()) {
        got[i] = c.status();
        return;
      }
      auto s = (*c)->OpenSession(std::nullopt);
      got[i] = s.ok() ? RunDecode(**s, reqs[i], (*c)->seed()) : Result<DecodeResult>(s.status());
    });
  }
  for (std::thread& t : threads) t.join();
  int succeeded = 0;
  for (int i = 0; i < kCoordinators; ++i) {
    SCOPED_TRACE("coordinator " + std::to_string(i));
    if (got[i].ok()) {
      ++succeeded;
      ExpectSameDecode(*got[i], Monolithic(model, reqs[i]));
      continue;
    }
    const Status& st = got[i].status();
    EXPECT_EQ(st.kind(), ErrorKind::kOverloaded) << st.ToString();
    EXPECT_NE(st.message().find("busy: this worker serves the coordinator"), std::string::npos)
        << st.message();
  }
  // The first stage is claimed first, so a race cannot leave every
  // coordinator holding some worker and none holding all.
  EXPECT_GE(succeeded, 1);
  std::cerr << succeeded << " of " << kCoordinators << " coordinators decoded\n";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::testing
