#include "keys/ed25519.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

namespace lockstep::keys {
namespace {

struct PkeyFree { void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); } };
struct MdCtxFree { void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); } };
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

Pkey PrivateKey(const Ed25519Seed& seed) {
  return Pkey(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()));
}

}  // namespace

Result<Ed25519Seed> GenerateEd25519Seed() {
  Ed25519Seed seed{};
  if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) {
    return InternalError("Ed25519: the system random number generator failed");
  }
  return seed;
}

Result<Ed25519Public> Ed25519PublicFromSeed(const Ed25519Seed& seed) {
  Pkey key = PrivateKey(seed);
  if (!key) return InternalError("Ed25519: OpenSSL refused the seed");
  Ed25519Public pub{};
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), pub.data(), &len) != 1 || len != pub.size()) {
    return InternalError("Ed25519: cannot derive the public key");
  }
  return pub;
}

Result<Ed25519Signature> Ed25519Sign(const Ed25519Seed& seed, std::span<const uint8_t> message) {
  Pkey key = PrivateKey(seed);
  MdCtx ctx(EVP_MD_CTX_new());
  if (!key || !ctx) return InternalError("Ed25519: OpenSSL allocation failed");
  if (EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return InternalError("Ed25519: sign init failed");
  }
  Ed25519Signature sig{};
  size_t len = sig.size();
  if (EVP_DigestSign(ctx.get(), sig.data(), &len, message.data(), message.size()) != 1 ||
      len != sig.size()) {
    return InternalError("Ed25519: signing failed");
  }
  return sig;
}

Status Ed25519Verify(const Ed25519Public& public_key, std::span<const uint8_t> message,
                     const Ed25519Signature& signature) {
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, public_key.data(),
                                       public_key.size()));
  if (!key) return InvalidError("Ed25519: the public key is not a valid key");
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx) return InternalError("Ed25519: OpenSSL allocation failed");
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return InvalidError("Ed25519: the public key is not usable for verification");
  }
  if (EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(),
                       message.size()) != 1) {
    return MismatchError("signature does not verify with this public key "
                         "(the signed bytes were changed, or another key signed them)");
  }
  return Status::Ok();
}

}  // namespace lockstep::keys
