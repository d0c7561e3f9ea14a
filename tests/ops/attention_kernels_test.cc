// The tiled attention slots (attend_scores, softmax_rows, attend_mix) of every
// kernel table this CPU supports against their scalar references: memcmp
// equality over head counts 1..7, head dims with tails, tile ranges and
// key ranges 0..2N with odd ends, misaligned pointers and special values;
// and the tiled scalar path against AttendHead, the spec-shaped reference
// over row-major rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/ops/dispatch.h"
#include "engine/ops/kernels.h"
#include "random_values.h"

namespace lockstep::ops {
namespace {

using testing::FromBits;
using testing::RandomValues;

constexpr size_t T = kKvTile;

bool SameBits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * 4) == 0; }

std::vector<const Kernels*> Tables() {
  std::vector<const Kernels*> out;
  for (const std::string& n : AvailableIsas()) out.push_back(KernelsByName(n));
  return out;
}

TEST(AttentionKernels, ScoresEqualScalar) {
  std::mt19937 rng(11);
  for (bool special : {false, true})
    for (size_t hd : {1, 3, 8, 16, 17, 64})
      for (size_t g : {1, 2, 3, 4, 5, 7})
        for (size_t t1 = 0; t1 <= 9; ++t1)
          for (size_t t0 : {size_t{0}, size_t{1}, t1 / 2}) {
            if (t0 > t1) continue;
            const auto q = RandomValues(rng, g * hd + 1, special);
            const auto k = RandomValues(rng, t1 * hd * T + 1, special);
            const size_t ss = t1 * T + 5;  // a row stride that is not a whole tile
            std::vector<float> want(g * ss + 1, 7.0f);
            AttendScores(q.data() + 1, g, k.data() + 1, t0, t1, hd, 0.125f, want.data() + 1, ss);
            for (const Kernels* kt : Tables()) {
              std::vector<float> got(g * ss + 1, 7.0f);  // untouched slots must stay 7
              kt->attend_scores(q.data() + 1, g, k.data() + 1, t0, t1, hd, 0.125f, got.data() + 1, ss);
              EXPECT_TRUE(SameBits(got.data(), want.data(), got.size()))
                  << kt->name << " hd " << hd << " g " << g << " tiles [" << t0 << ", " << t1
                  << ") special " << special;
            }
          }
}

TEST(AttentionKernels, SoftmaxEqualsScalar) {
  std::mt19937 rng(12);
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 2 * 16 + 3; ++n) sizes.push_back(n);
  for (size_t n : {47, 64, 255, 2049}) sizes.push_back(n);
  for (bool special : {false, true})
    for (size_t n : sizes) {
      std::vector<std::vector<float>> cases = {RandomValues(rng, n + 1, special)};
      if (n > 0) {  // zero maxima whose sign the first occurrence decides
        std::vector<float> z(n + 1, -1.0f);
        z[1 + n / 2] = -0.0f;
        z[n] = 0.0f;
        cases.push_back(z);
        std::swap(z[1 + n / 2], z[n]);
        cases.push_back(z);
        cases.push_back(std::vector<float>(n + 1, -std::numeric_limits<float>::infinity()));
        std::vector<float> nan_first(n + 1, 1.0f);
        nan_first[1] = FromBits(0x7FC00000u);
        cases.push_back(nan_first);
      }
      for (const std::vector<float>& in : cases) {
        std::vector<float> want = in;
        SoftmaxSeq(want.data() + 1, n);
        for (const Kernels* kt : Tables()) {
          std::vector<float> got = in;
          kt->softmax_rows(got.data() + 1, n, 1, n);
          EXPECT_TRUE(SameBits(got.data(), want.data(), got.size()))
              << kt->name << " n " << n << " special " << special;
        }
      }
      // 1..9 rows at a stride past n (sums interleaved in groups of up to 4).
      for (size_t rows = 1; rows <= 9; ++rows) {
        const size_t stride = n + 3;
        const std::vector<float> in = RandomValues(rng, rows * stride + 1, special);
        std::vector<float> want = in;
        SoftmaxRows(want.data() + 1, n, rows, stride);
        for (size_t r = 0; r < rows; ++r) {  // the reference is SoftmaxSeq per row
          std::vector<float> row(in.begin() + 1 + static_cast<ptrdiff_t>(r * stride),
                                 in.begin() + 1 + static_cast<ptrdiff_t>(r * stride + n));
          SoftmaxSeq(row.data(), n);
          ASSERT_TRUE(SameBits(row.data(), want.data() + 1 + r * stride, n));
        }
        for (const Kernels* kt : Tables()) {
          std::vector<float> got = in;
          kt->softmax_rows(got.data() + 1, n, rows, stride);
          EXPECT_TRUE(SameBits(got.data(), want.data(), got.size()))
              << kt->name << " n " << n << " rows " << rows << " special " << special;
        }
      }
    }
}

TEST(AttentionKernels, MixEqualsScalar) {
  std::mt19937 rng(13);
  for (bool special : {false, true})
    for (size_t hd : {1, 7, 16, 17, 32, 64, 80})
      for (size_t g : {1, 2, 3, 4, 5, 7})
        for (size_t end : {0, 1, 5, 16, 33})
          for (size_t lo : {size_t{0}, size_t{1}, end / 2}) {
            if (lo > end) continue;
            for (auto [d0, d1] : {std::pair{size_t{0}, hd}, std::pair{hd / 3, hd}, std::pair{size_t{0}, hd / 2},
                                  std::pair{hd / 2, hd}}) {
              const size_t ps = end + 3;
              const auto p = RandomValues(rng, g * ps + 1, special);
              const auto v = RandomValues(rng, end * hd + 1, special);
              std::vector<float> want(g * hd + 1, 7.0f);
              AttendMix(p.data() + 1, g, ps, v.data() + 1, lo, end, hd, d0, d1, want.data() + 1);
              for (const Kernels* kt : Tables()) {
                std::vector<float> got(g * hd + 1, 7.0f);
                kt->attend_mix(p.data() + 1, g, ps, v.data() + 1, lo, end, hd, d0, d1, got.data() + 1);
                EXPECT_TRUE(SameBits(got.data(), want.data(), got.size()))
                    << kt->name << " hd " << hd << " g " << g << " keys [" << lo << ", " << end
                    << ") dims [" << d0 << ", " << d1 << ") special " << special;
              }
            }
          }
}

// Row-major K/V rows laid out as KvCache tiles, through the scalar slots,
// equal AttendHead over the same rows: the tiles change where keys live,
// not a single operation.
TEST(AttentionKernels, TiledPathEqualsRowMajorReference) {
  std::mt19937 rng(14);
  for (size_t hd : {2, 8, 16, 64})
    for (size_t n : {1, 15, 16, 17, 40})
      for (size_t lo : {size_t{0}, size_t{1}, n - 1}) {
        const auto q = RandomValues(rng, hd, false);
        const auto k = RandomValues(rng, n * hd, false), v = RandomValues(rng, n * hd, false);
        const size_t tiles = (n + T - 1) / T;
        std::vector<float> kt(tiles * hd * T, 0.0f);
        for (size_t e = 0; e < n; ++e)
          for (size_t d = 0; d < hd; ++d) kt[(e / T) * hd * T + d * T + e % T] = k[e * hd + d];
        for (const Kernels* table : Tables()) {
          std::vector<float> p(tiles * T), got(hd), want_p(n - lo), want(hd);
          table->attend_scores(q.data(), 1, kt.data(), lo / T, tiles, hd, 0.125f, p.data(), p.size());
          table->softmax_rows(p.data() + lo, n - lo, 1, p.size());
          table->attend_mix(p.data(), 1, p.size(), v.data(), lo, n, hd, 0, hd, got.data());
          AttendHead(q.data(), k.data() + lo * hd, v.data() + lo * hd, hd, n - lo, hd, 0.125f,
                     want_p.data(), want.data());
          EXPECT_TRUE(SameBits(p.data() + lo, want_p.data(), n - lo)) << table->name << " hd " << hd << " n " << n;
          EXPECT_TRUE(SameBits(got.data(), want.data(), hd)) << table->name << " hd " << hd << " n " << n;
        }
      }
}

}  // namespace
}  // namespace lockstep::ops
