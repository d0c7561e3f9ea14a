// `lockstep run --speculative` writes the receipt plain decoding writes,
// byte for byte, except options.speculative (which no digest covers):
// greedy, sampled, windowed, evicting and traced runs, monolithic and on 2
// and 3 loopback workers (whose multi-row steps run on the workers); and
// verify accepts it (also on two loopback workers). The same with
// proposals from a smaller draft model (`--draft-model`, a folder or a
// .gguf), whose options.speculative says "draft-model"; the model as its
// own greedy draft has every proposal kept; a draft with another
// vocabulary or tokenizer, or none at the path, is refused naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "cli_runner.h"
#include "receipt/receipt.h"

namespace lockstep::receipt {
namespace {

using lockstep::testing::MakeTempDir;
using lockstep::testing::ReadJsonFile;
using lockstep::testing::RunCli;
using nlohmann::json;

// `make-model` arguments for a model in dir/name: the receipt tests'
// shape, or with `small` a one-layer narrower one; the seed gives the
// synthetic tokenizer, so equal seeds and vocabularies share it.
std::vector<std::string> MakeModelArgs(const std::string& path, bool small, const char* seed,
                                       const char* vocab) {
  if (small) {
    return {"make-model", path, "--seed", seed, "--hidden", "32", "--layers", "1", "--heads", "2",
            "--kv-heads", "1", "--inter", "48", "--vocab", vocab};
  }
  return {"make-model", path, "--seed", seed, "--hidden", "64", "--layers", "3",
          "--heads", "4", "--kv-heads", "2", "--inter", "96", "--vocab", vocab};
}

TEST(SpeculativeReceipt, EqualsThePlainReceiptByteForByte) {
  const std::string dir = MakeTempDir("speculative_receipt");
  auto made = RunCli(MakeModelArgs(dir + "/m", false, "3", "300"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::vector<std::string> base = {"run", "--model", dir + "/m", "--ids", "5,9,2,7,5,9,2,7,5,9"};
  const std::vector<std::vector<std::string>> cases = {
      {"--gen", "40"},
      {"--gen", "40", "--temperature", "0.8", "--top-k", "20", "--seed", "9"},
      {"--gen", "36", "--window", "5", "--evict", "1:2@3", "--evict", "0:1@20"},
      {"--gen", "24", "--trace", "--evict", "2:3@10"},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(n);
    // [workers][plain, speculative]; a sharded receipt also names its
    // plan and workers (endpoints and keys of that run), compared apart.
    std::vector<std::vector<json>> receipts;
    for (const char* workers : {"0", "2", "3"}) {
      receipts.emplace_back();
      for (bool speculative : {false, true}) {
        std::vector<std::string> args = base;
        args.insert(args.end(), c.begin(), c.end());
        const std::string path = dir + "/r" + std::to_string(n) + "w" + workers +
                                 (speculative ? "s" : "p") + ".json";
        args.insert(args.end(), {"--receipt", path, "--single-run", "--workers", workers});
        if (speculative) args.push_back("--speculative");
        auto r = RunCli(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        receipts.back().push_back(ReadJsonFile(path));
      }
    }
    for (size_t w = 0; w < receipts.size(); ++w) {
      SCOPED_TRACE("workers " + std::to_string(w == 0 ? 0 : w + 1));
      std::vector<json>& pair = receipts[w];
      EXPECT_FALSE(pair[0]["options"].contains("speculative"));
      EXPECT_EQ(pair[1]["options"]["speculative"], "prompt-lookup");
      pair[1]["options"].erase("speculative");
      for (json& j : pair) j.erase("timings");  // measurements, never compared
      if (w > 0) {
        EXPECT_EQ(pair[1]["plan"], pair[0]["plan"]);
      }
      for (json& j : pair) {
        j.erase("plan");
        j.erase("workers");
      }
      EXPECT_EQ(CanonicalBytes(pair[1]), CanonicalBytes(pair[0]));
      EXPECT_EQ(CanonicalBytes(pair[1]), CanonicalBytes(receipts[0][0]));  // sharded == monolithic
    }
    for (const char* workers : {"0", "2"}) {
      auto v = RunCli({"verify", dir + "/r" + std::to_string(n) + "w2s.json", "--model", dir + "/m",
                       "--workers", workers});
      EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    }
    ++n;
  }
  std::filesystem::remove_all(dir);
}

TEST(SpeculativeReceipt, WithADraftModelEqualsThePlainReceiptByteForByte) {
  const std::string dir = MakeTempDir("draft_receipt");
  std::vector<std::string> gguf = MakeModelArgs(dir + "/d.gguf", true, "3", "300");
  gguf.push_back("--gguf");
  for (const auto& args : {MakeModelArgs(dir + "/m", false, "3", "300"),
                           MakeModelArgs(dir + "/d", true, "3", "300"), gguf}) {
    auto made = RunCli(args);
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  const std::vector<std::string> base = {"run", "--model", dir + "/m", "--ids", "5,9,2,7,5,9,2,7,5,9"};
  const std::vector<std::vector<std::string>> cases = {
      {"--gen", "30"},
      {"--gen", "30", "--temperature", "0.8", "--top-k", "20", "--seed", "9"},
      {"--gen", "30", "--window", "5", "--evict", "1:2@3", "--evict", "0:1@20"},
  };
  int n = 0;
  for (const auto& c : cases) {
    for (const char* workers : {"0", "2"}) {
      SCOPED_TRACE(std::to_string(n) + " workers " + workers);
      std::vector<json> pair;
      // plain, a small draft (a folder, a .gguf), the model itself
      for (const char* draft : {"", "/d", "/d.gguf", "/m"}) {
        std::vector<std::string> args = base;
        args.insert(args.end(), c.begin(), c.end());
        const std::string tag = draft[0] != 0 ? draft + 1 : "p";
        const std::string path = dir + "/r" + std::to_string(n) + "w" + workers + tag + ".json";
        args.insert(args.end(), {"--receipt", path, "--single-run", "--workers", workers});
        if (draft[0] != 0) args.insert(args.end(), {"--draft-model", dir + draft});
        auto r = RunCli(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        pair.push_back(ReadJsonFile(path));
      }
      EXPECT_FALSE(pair[0]["options"].contains("speculative"));
      for (json& j : pair) {
        j.erase("timings");
        j.erase("workers");  // endpoints and keys of that run
      }
      for (size_t i = 1; i < pair.size(); ++i) {
        EXPECT_EQ(pair[i]["options"]["speculative"], "draft-model");
        pair[i]["options"].erase("speculative");
        EXPECT_EQ(CanonicalBytes(pair[i]), CanonicalBytes(pair[0]));
      }
    }
    ++n;
  }
  std::filesystem::remove_all(dir);
}

// "speculative = K of P proposed tokens kept (..%), N multi-row steps".
struct Note {
  unsigned long kept = 0, proposed = 0, passes = 0;
};
bool ParseNote(const std::string& out, Note* note) {
  std::smatch m;
  const std::regex re(R"(speculative += (\d+) of (\d+) proposed tokens kept \([0-9.]+%\), (\d+) multi-row steps)");
  if (!std::regex_search(out, m, re)) return false;
  note->kept = std::stoul(m[1]), note->proposed = std::stoul(m[2]), note->passes = std::stoul(m[3]);
  return true;
}

TEST(SpeculativeReceipt, TheModelAsItsOwnGreedyDraftHasEveryProposalKept) {
  const std::string dir = MakeTempDir("self_draft");
  auto made = RunCli(MakeModelArgs(dir + "/m", false, "3", "300"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  for (const char* workers : {"0", "2"}) {
    SCOPED_TRACE(workers);
    auto r = RunCli({"run", "--model", dir + "/m", "--ids", "5,9,2,7", "--gen", "40", "--single-run",
                     "--workers", workers, "--draft-model", dir + "/m"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Note note;
    ASSERT_TRUE(ParseNote(r.out, &note)) << r.out;
    EXPECT_GT(note.proposed, 0u);
    EXPECT_EQ(note.kept, note.proposed);
    EXPECT_LT(note.passes, 20u);  // 40 steps in fewer than 20 passes
  }
  std::filesystem::remove_all(dir);
}

TEST(SpeculativeReceipt, ADraftOfAnotherTokenizerOrNoneIsRefusedNamingIt) {
  const std::string dir = MakeTempDir("bad_draft");
  for (const auto& args : {MakeModelArgs(dir + "/m", false, "3", "300"),
                           MakeModelArgs(dir + "/vocab", true, "3", "280"),
                           MakeModelArgs(dir + "/tok", true, "4", "300")}) {
    auto made = RunCli(args);
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  struct Case {
    std::string draft, says;
  };
  const std::vector<Case> cases = {
      {dir + "/vocab", "vocabulary size (280 vs 300 tokens)"},
      {dir + "/tok", "tokenizer.json"},
      {dir + "/absent", "--draft-model " + dir + "/absent"},
  };
  for (const Case& c : cases) {
    for (const char* workers : {"0", "2"}) {
      SCOPED_TRACE(c.draft + " workers " + workers);
      auto r = RunCli({"run", "--model", dir + "/m", "--ids", "5,9,2,7", "--gen", "4",
                       "--workers", workers, "--draft-model", c.draft});
      EXPECT_NE(r.exit_code, 0);
      EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.draft), std::string::npos) << r.err;
      if (c.draft != dir + "/absent") {
        EXPECT_NE(r.err.find(dir + "/m"), std::string::npos) << r.err;
      }
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::receipt
