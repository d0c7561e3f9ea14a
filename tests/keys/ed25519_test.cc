// Ed25519 through OpenSSL: RFC 8032 §7.1 vectors, and signatures by another
// key or over changed bytes are refused.
#include "keys/ed25519.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/sha256.h"

namespace lockstep::keys {
namespace {

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

template <size_t N>
std::array<uint8_t, N> Fixed(const std::string& hex) {
  const auto v = FromHex(hex);
  std::array<uint8_t, N> a{};
  EXPECT_EQ(v.size(), N);
  std::copy(v.begin(), v.end(), a.begin());
  return a;
}

struct Rfc8032Case {
  const char* seed;
  const char* pub;
  const char* message;
  const char* signature;
};

// RFC 8032 §7.1, TEST 1 and TEST 2.
const Rfc8032Case kCases[] = {
    {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
    {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
};

TEST(Ed25519, Rfc8032Vectors) {
  for (const auto& c : kCases) {
    const auto seed = Fixed<32>(c.seed);
    const auto msg = FromHex(c.message);
    auto pub = Ed25519PublicFromSeed(seed);
    ASSERT_TRUE(pub.ok());
    EXPECT_EQ(*pub, Fixed<32>(c.pub));
    auto sig = Ed25519Sign(seed, msg);
    ASSERT_TRUE(sig.ok());
    EXPECT_EQ(*sig, Fixed<64>(c.signature));
    EXPECT_TRUE(Ed25519Verify(*pub, msg, *sig).ok());
  }
}

TEST(Ed25519, AnotherKeyOrChangedBytesFail) {
  auto seed_a = GenerateEd25519Seed();
  auto seed_b = GenerateEd25519Seed();
  ASSERT_TRUE(seed_a.ok() && seed_b.ok());
  ASSERT_NE(*seed_a, *seed_b);
  const std::string text = "{\"argmax_digest\":\"00\"}";
  const std::vector<uint8_t> msg(text.begin(), text.end());
  auto sig = Ed25519Sign(*seed_a, msg);
  ASSERT_TRUE(sig.ok());
  auto pub_a = Ed25519PublicFromSeed(*seed_a);
  auto pub_b = Ed25519PublicFromSeed(*seed_b);
  ASSERT_TRUE(pub_a.ok() && pub_b.ok());
  EXPECT_TRUE(Ed25519Verify(*pub_a, msg, *sig).ok());

  const Status other_key = Ed25519Verify(*pub_b, msg, *sig);
  EXPECT_EQ(other_key.kind(), ErrorKind::kMismatch);

  std::vector<uint8_t> changed = msg;
  changed.back() ^= 1;
  EXPECT_EQ(Ed25519Verify(*pub_a, changed, *sig).kind(), ErrorKind::kMismatch);

  auto bad_sig = *sig;
  bad_sig[10] ^= 0x40;
  EXPECT_EQ(Ed25519Verify(*pub_a, msg, bad_sig).kind(), ErrorKind::kMismatch);
}

}  // namespace
}  // namespace lockstep::keys
