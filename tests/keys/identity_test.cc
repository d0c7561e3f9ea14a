// Identity files: round trip, public twin, refusal to overwrite, and every
// kind of wrong or hostile file gives an error naming the problem without
// echoing key material.
#include "keys/identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_runner.h"
#include "keys/ed25519.h"

namespace lockstep::keys {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text, mode_t mode = 0600) {
  std::filesystem::remove(path);
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  chmod(path.c_str(), mode);
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

class IdentityFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = lockstep::testing::MakeTempDir("keys");
    auto id = GenerateIdentity();
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    id_ = *id;
    path_ = dir_ + "/node.key";
    ASSERT_TRUE(WriteIdentity(id_, path_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Rewrites the secret file with `line` replaced by `replacement`.
  std::string WithLine(const std::string& name, const std::string& replacement) {
    std::istringstream in(Slurp(path_));
    std::string out, line;
    while (std::getline(in, line)) {
      if (line.rfind(name + " =", 0) == 0) {
        if (!replacement.empty()) out += replacement + "\n";
      } else {
        out += line + "\n";
      }
    }
    return out;
  }

  std::string dir_, path_;
  Identity id_;
};

TEST_F(IdentityFiles, RoundTripAndModes) {
  EXPECT_EQ(ModeOf(path_), 0600u);
  EXPECT_EQ(ModeOf(path_ + ".pub"), 0644u);
  auto back = ReadIdentity(path_);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pub, id_.pub);
  EXPECT_EQ(back->curve_secret_z85, id_.curve_secret_z85);
  EXPECT_EQ(back->sign_seed, id_.sign_seed);
  EXPECT_EQ(id_.pub.curve_public_z85.size(), 40u);

  auto pub = ReadPublicIdentity(path_ + ".pub");
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(*pub, id_.pub);
  auto pub_from_secret = ReadPublicIdentity(path_);
  ASSERT_TRUE(pub_from_secret.ok());
  EXPECT_EQ(*pub_from_secret, id_.pub);

  // The .pub file holds no secret.
  const std::string pub_text = Slurp(path_ + ".pub");
  EXPECT_EQ(pub_text.find(id_.curve_secret_z85), std::string::npos);
  EXPECT_EQ(pub_text.find("secret ="), std::string::npos);

  // The loaded seed signs for the published key.
  const std::vector<uint8_t> msg = {1, 2, 3};
  auto sig = Ed25519Sign(back->sign_seed, msg);
  ASSERT_TRUE(sig.ok());
  EXPECT_TRUE(Ed25519Verify(pub->sign_public, msg, *sig).ok());
}

TEST_F(IdentityFiles, TwoIdentitiesDiffer) {
  auto other = GenerateIdentity();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->pub.curve_public_z85, id_.pub.curve_public_z85);
  EXPECT_NE(other->pub.sign_public, id_.pub.sign_public);
}

TEST_F(IdentityFiles, RefusesOverwriteUnlessAsked) {
  auto other = GenerateIdentity();
  ASSERT_TRUE(other.ok());
  const Status st = WriteIdentity(*other, path_);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("already exists"), std::string::npos) << st.message();
  EXPECT_EQ(ReadIdentity(path_)->pub, id_.pub);  // untouched
  ASSERT_TRUE(WriteIdentity(*other, path_, /*overwrite=*/true).ok());
  EXPECT_EQ(ReadIdentity(path_)->pub, other->pub);
  EXPECT_EQ(ReadPublicIdentity(path_ + ".pub").value(), other->pub);
  EXPECT_EQ(ModeOf(path_), 0600u);
}

TEST_F(IdentityFiles, PublicFileIsNotASecretFile) {
  auto r = ReadIdentity(path_ + ".pub");
  // The .pub file is 0644, which is fine for it but it has no secrets.
  ASSERT_FALSE(r.ok());
}

TEST_F(IdentityFiles, SecretReadableByOthersIsRefused) {
  chmod(path_.c_str(), 0644);
  auto r = ReadIdentity(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("chmod 600"), std::string::npos) << r.status().message();
}

TEST_F(IdentityFiles, MissingDirectoryAndHugeFiles) {
  auto missing = ReadIdentity(dir_ + "/nope.key");
  EXPECT_EQ(missing.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.key"), std::string::npos);

  auto directory = ReadPublicIdentity(dir_);
  EXPECT_EQ(directory.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(directory.status().message().find("not a regular file"), std::string::npos);

  WriteText(dir_ + "/huge.key", std::string(1 << 20, '#'));
  auto huge = ReadIdentity(dir_ + "/huge.key");
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos);

  std::filesystem::create_symlink(path_, dir_ + "/link.key");
  EXPECT_FALSE(ReadIdentity(dir_ + "/link.key").ok());
}

TEST_F(IdentityFiles, CorruptFilesNameTheProblemWithoutLeakingSecrets) {
  struct Case {
    std::string text;
    std::string expect;  // in the message
  };
  const std::string curve_secret_line = "curve_secret = " + id_.curve_secret_z85;
  auto other = GenerateIdentity();
  ASSERT_TRUE(other.ok());
  const std::vector<Case> cases = {
      {WithLine("curve_secret", ""), "no 'curve_secret'"},
      {WithLine("sign_secret", ""), "no 'sign_secret'"},
      {WithLine("curve_public", ""), "no 'curve_public'"},
      {WithLine("sign_public", "sign_public = abc"), "sign_public: expected 64 hex"},
      {WithLine("sign_public", "sign_public = " + std::string(64, 'z')), "not a hex string"},
      {WithLine("curve_secret", "curve_secret = short"), "curve_secret: expected 40 Z85"},
      {WithLine("curve_secret", "curve_secret = " + std::string(40, '"')), "not valid Z85"},
      {WithLine("curve_secret", "curve_secret = " + other->curve_secret_z85),
       "curve_secret does not belong to curve_public"},
      {WithLine("sign_public", "sign_public = " + SignPublicHex(other->pub)),
       "sign_secret does not belong to sign_public"},
      {WithLine("sign_secret", "sign_secret") , "expected 'name = value'"},
      {Slurp(path_) + curve_secret_line + "\n", "appears twice"},
      {Slurp(path_) + "password = hunter2\n", "unknown name 'password'"},
      {"", "no 'curve_secret'"},
      {std::string("\0\0\0\xff", 4), "expected 'name = value'"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string p = dir_ + "/bad" + std::to_string(i) + ".key";
    WriteText(p, cases[i].text);
    auto r = ReadIdentity(p);
    ASSERT_FALSE(r.ok()) << "case " << i;
    const std::string msg = r.status().message();
    EXPECT_NE(msg.find(cases[i].expect), std::string::npos) << "case " << i << ": " << msg;
    EXPECT_NE(msg.find(p), std::string::npos) << "case " << i << ": " << msg;
    EXPECT_EQ(msg.find(id_.curve_secret_z85), std::string::npos) << "case " << i;
    EXPECT_EQ(msg.find(other->curve_secret_z85), std::string::npos) << "case " << i;
  }
}

}  // namespace
}  // namespace lockstep::keys
