// Sha256BlocksX8 for AVX-512VL (sha256_lanes.h): eight SHA-256 messages,
// one per 32-bit lane of a 256-bit vector, rounds exactly as FIPS 180-4
// §6.2.2.
// Built with -mavx512f -mavx512vl (engine/io/CMakeLists.txt) and reached
// only through the run-time check in sha256_lanes.cc. Integer-only code.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace lockstep::sha256_lanes {
namespace {

using V = __m256i;

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

// vpternlogd truth tables: x ^ y ^ z, Ch(x, y, z), Maj(x, y, z).
constexpr int kXor3 = 0x96;
constexpr int kCh = 0xCA;
constexpr int kMaj = 0xE8;

V Add(V a, V b) { return _mm256_add_epi32(a, b); }

V BigSigma0(V x) {
  return _mm256_ternarylogic_epi32(_mm256_ror_epi32(x, 2), _mm256_ror_epi32(x, 13), _mm256_ror_epi32(x, 22),
                                kXor3);
}
V BigSigma1(V x) {
  return _mm256_ternarylogic_epi32(_mm256_ror_epi32(x, 6), _mm256_ror_epi32(x, 11), _mm256_ror_epi32(x, 25),
                                kXor3);
}
V SmallSigma0(V x) {
  return _mm256_ternarylogic_epi32(_mm256_ror_epi32(x, 7), _mm256_ror_epi32(x, 18), _mm256_srli_epi32(x, 3),
                                kXor3);
}
V SmallSigma1(V x) {
  return _mm256_ternarylogic_epi32(_mm256_ror_epi32(x, 17), _mm256_ror_epi32(x, 19), _mm256_srli_epi32(x, 10),
                                kXor3);
}

// w[4g .. 4g+3] of every lane: big-endian words, lanes transposed. Vector
// x[l] holds lane l's four words in its low half and lane l + 4's in its
// high half; the unpacks transpose both halves at once.
void LoadWords(const uint8_t* const p[8], size_t g, V* w) {
  const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
  auto words = [&](int l) {
    return _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[l] + 16 * g)),
                            bswap);
  };
  V x[4];
  for (int l = 0; l < 4; ++l) x[l] = _mm256_set_m128i(words(l + 4), words(l));
  const V t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpackhi_epi32(x[0], x[1]);
  const V t2 = _mm256_unpacklo_epi32(x[2], x[3]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
  w[0] = _mm256_unpacklo_epi64(t0, t2);
  w[1] = _mm256_unpackhi_epi64(t0, t2);
  w[2] = _mm256_unpacklo_epi64(t1, t3);
  w[3] = _mm256_unpackhi_epi64(t1, t3);
}

// One block of every lane: s = H0..H7 as vectors of lanes.
void Block(V s[8], const uint8_t* const p[8]) {
  V w[16];
  for (size_t g = 0; g < 4; ++g) LoadWords(p, g, w + 4 * g);
  V a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
#pragma GCC unroll 64
  for (int t = 0; t < 64; ++t) {
    if (t >= 16) {
      w[t & 15] = Add(Add(w[t & 15], SmallSigma0(w[(t - 15) & 15])),
                      Add(w[(t - 7) & 15], SmallSigma1(w[(t - 2) & 15])));
    }
    const V t1 = Add(Add(h, Add(w[t & 15], _mm256_set1_epi32(static_cast<int>(kRound[t])))),
                     Add(BigSigma1(e), _mm256_ternarylogic_epi32(e, f, g, kCh)));
    const V t2 = Add(BigSigma0(a), _mm256_ternarylogic_epi32(a, b, c, kMaj));
    h = g;
    g = f;
    f = e;
    e = Add(d, t1);
    d = c;
    c = b;
    b = a;
    a = Add(t1, t2);
  }
  s[0] = Add(s[0], a);
  s[1] = Add(s[1], b);
  s[2] = Add(s[2], c);
  s[3] = Add(s[3], d);
  s[4] = Add(s[4], e);
  s[5] = Add(s[5], f);
  s[6] = Add(s[6], g);
  s[7] = Add(s[7], h);
}

}  // namespace

void BlocksX8Avx512(uint32_t h[8][8], const uint8_t* const blocks[8], size_t n) {
  V s[8];
  for (int i = 0; i < 8; ++i) {
    alignas(32) uint32_t lanes[8];
    for (int l = 0; l < 8; ++l) lanes[l] = h[l][i];
    s[i] = _mm256_load_si256(reinterpret_cast<const V*>(lanes));
  }
  for (size_t k = 0; k < n; ++k) {
    const uint8_t* p[8];
    for (int l = 0; l < 8; ++l) p[l] = blocks[l] + 64 * k;
    Block(s, p);
  }
  for (int i = 0; i < 8; ++i) {
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<V*>(lanes), s[i]);
    for (int l = 0; l < 8; ++l) h[l][i] = lanes[l];
  }
}

}  // namespace lockstep::sha256_lanes
