#include "engine/io/sha256_lanes.h"

#include <algorithm>
#include <array>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace lockstep {

#if defined(__x86_64__)
namespace sha256_lanes {
void BlocksX8Avx512(uint32_t h[8][8], const uint8_t* const blocks[8], size_t n);
}  // namespace sha256_lanes
#endif

namespace {

constexpr size_t kBlock = 64;
constexpr size_t kLengthAt = 32;  // Sha256State layout (base/sha256.h)
constexpr size_t kNumAt = 104;

uint32_t GetU32Le(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
void PutU32Le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t GetU64Le(const uint8_t* p) { return GetU32Le(p) | uint64_t{GetU32Le(p + 4)} << 32; }
void PutU64Le(uint8_t* p, uint64_t v) {
  PutU32Le(p, static_cast<uint32_t>(v));
  PutU32Le(p + 4, static_cast<uint32_t>(v >> 32));
}

bool HasShaExtensions() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b >> 29) & 1;
#else
  return false;
#endif
}

bool DetectKernel() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

// A stream between its pending partial block and its tail: whole blocks
// still to compress, and its chaining value and bit count while they are.
struct Lane {
  Sha256Stream* stream;
  std::span<const uint8_t> blocks;  // whole blocks (num == 0 before them)
  std::span<const uint8_t> tail;    // < 64 bytes, after them
  std::array<uint32_t, 8> h{};
  uint64_t bits = 0;
  size_t done = 0;  // blocks compressed so far
};

// Compresses the lanes' blocks together while two or more have some left;
// then writes each lane's state back. A lane whose state could not be
// taken back (never expected: the state is built consistent) keeps its
// stream as it was and `done` = 0, so its blocks are fed again alone.
void CompressTogether(std::span<Lane> lanes) {
  for (Lane& l : lanes) {
    const Sha256State st = l.stream->Export();
    for (size_t i = 0; i < 8; ++i) l.h[i] = GetU32Le(st.bytes.data() + 4 * i);
    l.bits = GetU64Le(st.bytes.data() + kLengthAt);
  }
  for (;;) {
    std::array<Lane*, kSha256Lanes> active{};
    size_t n = 0;
    size_t m = SIZE_MAX;
    for (Lane& l : lanes) {
      const size_t left = l.blocks.size() / kBlock - l.done;
      if (left == 0) continue;
      active[n++] = &l;
      m = std::min(m, left);
    }
    if (n < 2) break;
    uint32_t h[kSha256Lanes][8];
    const uint8_t* p[kSha256Lanes];
    for (size_t i = 0; i < kSha256Lanes; ++i) {
      const Lane& l = *active[i < n ? i : 0];  // spare lanes repeat the first
      std::copy(l.h.begin(), l.h.end(), h[i]);
      p[i] = l.blocks.data() + kBlock * l.done;
    }
    Sha256BlocksX8(h, p, m);
    for (size_t i = 0; i < n; ++i) {
      std::copy(h[i], h[i] + 8, active[i]->h.begin());
      active[i]->done += m;
      active[i]->bits += uint64_t{8 * kBlock} * m;
    }
  }
  for (Lane& l : lanes) {
    if (l.done == 0) continue;
    Sha256State st;
    for (size_t i = 0; i < 8; ++i) PutU32Le(st.bytes.data() + 4 * i, l.h[i]);
    PutU64Le(st.bytes.data() + kLengthAt, l.bits);
    PutU32Le(st.bytes.data() + kNumAt, 0);
    Result<Sha256Stream> back = Sha256Stream::Import(st);
    if (back.ok()) {
      *l.stream = std::move(back).value();
    } else {
      l.done = 0;
    }
  }
}

}  // namespace

bool Sha256LanesKernelRuns() {
  static const bool runs = DetectKernel();
  return runs;
}

bool Sha256LanesPay(size_t streams) {
  static const bool runs = Sha256LanesKernelRuns(), sha = HasShaExtensions();
  return runs && streams >= (sha ? kSha256LanesOverShaExtensions : 2);
}

void Sha256BlocksX8(uint32_t h[kSha256Lanes][8], const uint8_t* const blocks[kSha256Lanes],
                    size_t n) {
#if defined(__x86_64__)
  sha256_lanes::BlocksX8Avx512(h, blocks, n);
#else
  (void)h, (void)blocks, (void)n;
#endif
}

void UpdateLanes(std::span<Sha256Stream* const> streams,
                 std::span<const std::span<const uint8_t>> bytes) {
  const size_t n = std::min({streams.size(), bytes.size(), kSha256Lanes});
  if (!Sha256LanesPay(n)) {
    for (size_t i = 0; i < n; ++i) streams[i]->Update(bytes[i]);
    return;
  }
  UpdateLanesInKernel(streams, bytes);
}

void UpdateLanesInKernel(std::span<Sha256Stream* const> streams,
                         std::span<const std::span<const uint8_t>> bytes) {
  const size_t n = std::min({streams.size(), bytes.size(), kSha256Lanes});
  std::array<Lane, kSha256Lanes> lanes;
  for (size_t i = 0; i < n; ++i) {
    Lane& l = lanes[i];
    l.stream = streams[i];
    std::span<const uint8_t> rest = bytes[i];
    // Complete a pending partial block first, so the blocks start aligned.
    const size_t num = GetU32Le(l.stream->Export().bytes.data() + kNumAt);
    if (num != 0) {
      const size_t fill = std::min(kBlock - num, rest.size());
      l.stream->Update(rest.first(fill));
      rest = rest.subspan(fill);
    }
    const size_t whole = rest.size() / kBlock * kBlock;
    l.blocks = rest.first(whole);
    l.tail = rest.subspan(whole);
  }
  CompressTogether(std::span<Lane>(lanes.data(), n));
  for (size_t i = 0; i < n; ++i) {
    Lane& l = lanes[i];
    l.stream->Update(l.blocks.subspan(kBlock * l.done));  // a lone lane's last blocks
    l.stream->Update(l.tail);
  }
}

}  // namespace lockstep
