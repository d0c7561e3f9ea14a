// `lockstep keygen`: writes a readable identity, prints only public keys,
// refuses to overwrite without --force.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "cli_runner.h"
#include "keys/identity.h"

namespace lockstep::keys {
namespace {

using lockstep::testing::RunCli;

TEST(KeygenCli, WritesPrintsPublicOnlyAndRefusesOverwrite) {
  const std::string dir = lockstep::testing::MakeTempDir("keygen");
  const std::string out = dir + "/node.key";
  auto r = RunCli({"keygen", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto id = ReadIdentity(out);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  struct stat st {};
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(r.out.find(id->pub.curve_public_z85), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(SignPublicHex(id->pub)), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(id->curve_secret_z85), std::string::npos);
  EXPECT_EQ(r.err.find(id->curve_secret_z85), std::string::npos);

  auto again = RunCli({"keygen", out});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already exists"), std::string::npos) << again.err;
  EXPECT_EQ(ReadIdentity(out)->pub, id->pub);

  auto forced = RunCli({"keygen", out, "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  auto replaced = ReadIdentity(out);
  ASSERT_TRUE(replaced.ok());
  EXPECT_NE(replaced->pub, id->pub);
  EXPECT_EQ(ReadPublicIdentity(out + ".pub").value(), replaced->pub);

  auto no_dir = RunCli({"keygen", dir + "/missing/sub/node.key"});
  EXPECT_EQ(no_dir.exit_code, 1);
  EXPECT_NE(no_dir.err.find("missing/sub/node.key"), std::string::npos) << no_dir.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::keys
