// GEMM kernels against reference matmuls of the dequantized operands (double accumulation):
// integer paths exact, float paths within their stated bounds, bits independent of threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "qnum/kernel/gemm.hpp"
#include "bf16_reference.hpp"
#include "kernel/helpers.hpp"

using qnum_test::bf16_reference_nt;
using qnum_test::randn;
using qnum_test::transposed;

namespace {

struct Shape3 {
  std::int64_t m, n, k;
};
const std::vector<Shape3> kShapes = {
    {1, 1, 1},       {7, 13, 29},    {64, 64, 64},
    {100, 37, 257},  {13, 70, 300},  {50, 300, 1100},  // several K chunks, column tiles
    {15, 33, 1},     {29, 65, 17},   {141, 97, 513},   // K = 1; one past tile edges
    {141, 128, 600}, {30, 256, 300}, {17, 288, 70},    // B [K,N] in place, and just past
    {270, 40, 300}};  // TN: A [K,M] rows past kBInPlaceMaxN (copied to a k-major strip)

std::vector<std::int8_t> rand_s8(std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<std::int8_t> v(n);
  for (auto& x : v) x = static_cast<std::int8_t>(d(g));
  return v;
}

/// ref[i,j] = Σ_k a[i,k] b[j,k] in double, and Σ_k |a b|.
void ref_nt(const std::vector<float>& a, const std::vector<float>& b, std::int64_t M, std::int64_t N, std::int64_t K,
            std::vector<double>& ref, std::vector<double>& absref) {
  ref.assign(static_cast<std::size_t>(M * N), 0.0);
  absref.assign(static_cast<std::size_t>(M * N), 0.0);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double s = 0, t = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double p =
            static_cast<double>(a[static_cast<std::size_t>(i * K + k)]) * b[static_cast<std::size_t>(j * K + k)];
        s += p;
        t += std::fabs(p);
      }
      ref[static_cast<std::size_t>(i * N + j)] = s;
      absref[static_cast<std::size_t>(i * N + j)] = t;
    }
}

double gamma(std::int64_t n) {
  const double u = std::ldexp(1.0, -24);
  return static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}

template <class T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

/// Runs f() under 1, 2 and 3 threads and checks the outputs are bit-identical.
template <class T, class F>
std::vector<T> across_threads(F&& f) {
  const int saved = qnum::num_threads();
  qnum::set_num_threads(1);
  std::vector<T> r1 = f();
  for (int t : {2, 3}) {
    qnum::set_num_threads(t);
    CHECK(same_bits(r1, f()));
  }
  qnum::set_num_threads(saved);
  return r1;
}

}  // namespace

TEST_CASE("kernel gemm: fp32 NT, NN and TN within gamma_K of the double reference, identical across threads") {
  for (const auto& s : kShapes) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const auto a = randn(static_cast<std::size_t>(s.m * s.k), 1);
    const auto b = randn(static_cast<std::size_t>(s.n * s.k), 2);
    std::vector<double> ref, absref;
    ref_nt(a, b, s.m, s.n, s.k, ref, absref);
    const auto c = across_threads<float>([&] {
      std::vector<float> out(static_cast<std::size_t>(s.m * s.n), -7.0f);
      qnum::gemm_f32_nt(a.data(), b.data(), out.data(), s.m, s.n, s.k);
      return out;
    });
    // B transposed to [K,N] for the NN form: same kernel after packing (or reading B in place,
    // N a multiple of the panel width up to kBInPlaceMaxN), so the same bits.
    const auto bt = transposed(b, s.n, s.k);
    std::vector<float> cnn(c.size());
    qnum::gemm_f32_nn(a.data(), bt.data(), cnn.data(), s.m, s.n, s.k);
    CHECK(same_bits(c, cnn));
    // A given transposed ([K,M]) to the TN form: read in place while packing, the same bits.
    const auto at = transposed(a, s.m, s.k);
    const auto ctn = across_threads<float>([&] {
      std::vector<float> out(c.size(), -7.0f);
      qnum::gemm_f32_tn(at.data(), bt.data(), out.data(), s.m, s.n, s.k);
      return out;
    });
    CHECK(same_bits(c, ctn));
    int bad = 0;
    for (std::size_t i = 0; i < c.size(); ++i)
      bad += std::fabs(c[i] - ref[i]) > gamma(s.k + 1) * absref[i] + 1e-30;  // +1: builds without FMA
    CHECK(bad == 0);
  }
}

TEST_CASE("kernel gemm: strided operands give the dense products' bits, writing only C's block") {
  // Blocks of wider row-major tensors (an attention head of [T, heads·D]): each form on the
  // strided blocks equals the dense form on copies of them. Padding columns of C keep their
  // sentinel. ld 128 reads B [K,N] in place, 320 packs it (past kBInPlaceMaxN).
  using qnum::GemmForm;
  for (const auto& s : kShapes)
    for (std::int64_t pad : {0, 5, 128 + 3})
      for (GemmForm form : {GemmForm::nt, GemmForm::nn, GemmForm::tn}) {
        CAPTURE(s.m);
        CAPTURE(s.n);
        CAPTURE(s.k);
        CAPTURE(pad);
        const bool nt = form == GemmForm::nt, a_t = form == GemmForm::tn;
        const std::int64_t a_rows = a_t ? s.k : s.m, a_cols = a_t ? s.m : s.k;
        const std::int64_t b_rows = nt ? s.n : s.k, b_cols = nt ? s.k : s.n;
        const std::int64_t lda = a_cols + pad, ldb = b_cols + pad + 1, ldc = s.n + pad + 2;
        const auto abig = randn(static_cast<std::size_t>(a_rows * lda), 40);
        const auto bbig = randn(static_cast<std::size_t>(b_rows * ldb), 41);
        std::vector<float> a(static_cast<std::size_t>(a_rows * a_cols)), b(static_cast<std::size_t>(b_rows * b_cols));
        for (std::int64_t i = 0; i < a_rows; ++i) std::copy_n(abig.data() + i * lda, a_cols, a.data() + i * a_cols);
        for (std::int64_t i = 0; i < b_rows; ++i) std::copy_n(bbig.data() + i * ldb, b_cols, b.data() + i * b_cols);
        std::vector<float> want(static_cast<std::size_t>(s.m * s.n));
        if (nt)
          qnum::gemm_f32_nt(a.data(), b.data(), want.data(), s.m, s.n, s.k);
        else if (a_t)
          qnum::gemm_f32_tn(a.data(), b.data(), want.data(), s.m, s.n, s.k);
        else
          qnum::gemm_f32_nn(a.data(), b.data(), want.data(), s.m, s.n, s.k);
        const auto got = across_threads<float>([&] {
          std::vector<float> c(static_cast<std::size_t>(s.m * ldc), -7.0f);
          qnum::gemm_f32_strided(form, abig.data(), lda, bbig.data(), ldb, c.data(), ldc, s.m, s.n, s.k);
          return c;
        });
        int bad = 0, touched = 0;
        for (std::int64_t i = 0; i < s.m; ++i)
          for (std::int64_t j = 0; j < ldc; ++j) {
            const float g = got[static_cast<std::size_t>(i * ldc + j)];
            if (j < s.n)
              bad += std::bit_cast<std::uint32_t>(g) !=
                     std::bit_cast<std::uint32_t>(want[static_cast<std::size_t>(i * s.n + j)]);
            else
              touched += g != -7.0f;
          }
        CHECK(bad == 0);
        CHECK(touched == 0);
      }
  std::vector<float> x(64);
  CHECK_THROWS_AS(qnum::gemm_f32_strided(GemmForm::nt, x.data(), 3, x.data(), 4, x.data(), 4, 2, 2, 4), qnum::Error);
  CHECK_THROWS_AS(qnum::gemm_f32_strided(GemmForm::nn, x.data(), 4, x.data(), 1, x.data(), 2, 2, 2, 4), qnum::Error);
  CHECK_THROWS_AS(qnum::gemm_f32_strided(GemmForm::tn, x.data(), 2, x.data(), 2, x.data(), 1, 2, 2, 4), qnum::Error);
}

TEST_CASE("kernel gemm: fp32 with bias in the epilogue equals the GEMM then a bias pass, bit for bit") {
  for (const auto& s : kShapes) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const auto a = randn(static_cast<std::size_t>(s.m * s.k), 30);
    const auto b = randn(static_cast<std::size_t>(s.n * s.k), 31);
    const auto bias = randn(static_cast<std::size_t>(s.n), 32, 3.0f);
    std::vector<float> want(static_cast<std::size_t>(s.m * s.n));
    qnum::gemm_f32_nt(a.data(), b.data(), want.data(), s.m, s.n, s.k);
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j)
        want[static_cast<std::size_t>(i * s.n + j)] += bias[static_cast<std::size_t>(j)];
    const auto got = across_threads<float>([&] {
      std::vector<float> out(want.size(), -7.0f);
      qnum::gemm_f32_nt_bias(a.data(), b.data(), bias.data(), out.data(), s.m, s.n, s.k);
      return out;
    });
    CHECK(same_bits(got, want));
  }
  std::vector<float> a(16), c(16);
  CHECK_THROWS_AS(qnum::gemm_f32_nt_bias(a.data(), a.data(), nullptr, c.data(), 4, 4, 4), qnum::Error);
}

TEST_CASE("kernel gemm: int8 x int8 -> int32 exact; fixed-point rescale equals the dequantized reference") {
  for (const auto& s : kShapes) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const auto a = rand_s8(static_cast<std::size_t>(s.m * s.k), 3);
    auto b = rand_s8(static_cast<std::size_t>(s.n * s.k), 4);
    b[0] = -128;  // the extremes, including -128·-128
    const auto c = across_threads<std::int32_t>([&] {
      std::vector<std::int32_t> out(static_cast<std::size_t>(s.m * s.n));
      qnum::gemm_s8_nt(a.data(), b.data(), out.data(), s.m, s.n, s.k);
      return out;
    });
    int bad = 0;
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        std::int64_t r = 0;
        for (std::int64_t k = 0; k < s.k; ++k)
          r += a[static_cast<std::size_t>(i * s.k + k)] * b[static_cast<std::size_t>(j * s.k + k)];
        bad += r != c[static_cast<std::size_t>(i * s.n + j)];
      }
    CHECK(bad == 0);

    // Fixed point: Fa = 4, Fb = 6, against the double matmul of the dequantized values.
    const int Fa = 4, Fb = 6;
    std::vector<float> af(a.size()), bf(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) af[i] = std::ldexp(static_cast<float>(a[i]), -Fa);
    for (std::size_t i = 0; i < b.size(); ++i) bf[i] = std::ldexp(static_cast<float>(b[i]), -Fb);
    std::vector<double> ref, absref;
    ref_nt(af, bf, s.m, s.n, s.k, ref, absref);
    std::vector<float> y(static_cast<std::size_t>(s.m * s.n));
    qnum::gemm_fixed8_nt(a.data(), Fa, b.data(), Fb, y.data(), s.m, s.n, s.k);
    bad = 0;
    for (std::size_t i = 0; i < y.size(); ++i) bad += y[i] != static_cast<float>(ref[i]);
    CHECK(bad == 0);
  }
}

TEST_CASE("kernel gemm: fixed8 with bias equals the fp32 GEMM with bias of the dequantized codes, bit for bit") {
  // Up to kGemmFixed8ExactK every partial sum of the fp32 GEMM is exact, so a quantized Linear
  // may take either path; K = 1024 with all codes at -128 reaches |Σ| = 2^24 exactly.
  std::vector<Shape3> shapes = kShapes;
  shapes.push_back({5, 40, qnum::kGemmFixed8ExactK});
  for (const auto& s : shapes) {
    if (s.k > qnum::kGemmFixed8ExactK) continue;
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    auto a = rand_s8(static_cast<std::size_t>(s.m * s.k), 40);
    auto b = rand_s8(static_cast<std::size_t>(s.n * s.k), 41);
    if (s.k == qnum::kGemmFixed8ExactK) {
      std::fill(a.begin(), a.begin() + s.k, std::int8_t{-128});
      std::fill(b.begin(), b.begin() + s.k, std::int8_t{-128});
    }
    const auto bias = randn(static_cast<std::size_t>(s.n), 42);
    for (const auto& [Fa, Fb] : {std::pair{4, 7}, std::pair{0, 0}, std::pair{30, 40}, std::pair{-3, 9}}) {
      CAPTURE(Fa);
      CAPTURE(Fb);
      std::vector<float> af(a.size()), bf(b.size());
      for (std::size_t i = 0; i < a.size(); ++i) af[i] = std::ldexp(static_cast<float>(a[i]), -Fa);
      for (std::size_t i = 0; i < b.size(); ++i) bf[i] = std::ldexp(static_cast<float>(b[i]), -Fb);
      std::vector<float> want(static_cast<std::size_t>(s.m * s.n)), want_nb(want.size());
      qnum::gemm_f32_nt_bias(af.data(), bf.data(), bias.data(), want.data(), s.m, s.n, s.k);
      qnum::gemm_f32_nt(af.data(), bf.data(), want_nb.data(), s.m, s.n, s.k);
      const auto got = across_threads<float>([&] {
        std::vector<float> out(want.size(), -7.0f);
        qnum::gemm_fixed8_nt(a.data(), Fa, b.data(), Fb, out.data(), s.m, s.n, s.k, bias.data());
        return out;
      });
      CHECK(same_bits(got, want));
      std::vector<float> got_nb(want.size(), -7.0f);
      qnum::gemm_fixed8_nt(a.data(), Fa, b.data(), Fb, got_nb.data(), s.m, s.n, s.k);
      CHECK(same_bits(got_nb, want_nb));
    }
  }
}

TEST_CASE("kernel gemm: int8 all -128 stays exact over several K chunks and at the largest K") {
  for (const std::int64_t K : {std::int64_t{4097}, qnum::kGemmInt8MaxK}) {
    const std::int64_t M = K > 5000 ? 1 : 3, N = K > 5000 ? 2 : 5;
    std::vector<std::int8_t> a(static_cast<std::size_t>(M * K), -128), b(static_cast<std::size_t>(N * K), -128);
    std::vector<std::int32_t> c(static_cast<std::size_t>(M * N));
    qnum::gemm_s8_nt(a.data(), b.data(), c.data(), M, N, K);
    for (auto v : c) CHECK(v == 16384 * K);  // 2147467264 at the largest K: the int32 range is enough
  }
}

TEST_CASE("kernel gemm: AMX int8 equals the VNNI/reference sums") {
  // gemm_s8_nt (and gemm_fixed8_nt's epilogue) run on AMX-INT8 tiles where amx_enabled(): K
  // padded to 64, rows to 32, A read in place when K % 64 == 0 and A is 64-byte aligned.
  if (!qnum::kernel::amx_enabled()) MESSAGE("AMX is not enabled here: checking the active int8 path only");
  const std::vector<Shape3> shapes = {{1, 47, 63},  {1, 17, 65},    {1, 1, 1},     {5, 47, 1},
                                      {31, 17, 64}, {33, 17, 3071}, {70, 47, 128}, {128, 768, 768}};
  for (const auto& s : shapes)
    for (const bool extreme : {false, true}) {
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      CAPTURE(extreme);
      // A at a 64-byte boundary (the in-place path) and one byte past it (the packed path).
      const auto a0 = rand_s8(static_cast<std::size_t>(s.m * s.k), 21);
      auto b = rand_s8(static_cast<std::size_t>(s.n * s.k), 22);
      std::vector<std::int8_t> abuf(a0.size() + 128);
      std::int8_t* base = abuf.data() + (64 - reinterpret_cast<std::uintptr_t>(abuf.data()) % 64);
      if (extreme) std::fill(b.begin(), b.end(), std::int8_t{-128});  // K·16384 sums
      for (const std::int64_t off : {0, 1}) {
        CAPTURE(off);
        std::int8_t* a = base + off;
        if (extreme)
          std::fill(a, a + a0.size(), std::int8_t{-128});
        else
          std::copy(a0.begin(), a0.end(), a);
        const auto c = across_threads<std::int32_t>([&] {
          std::vector<std::int32_t> out(static_cast<std::size_t>(s.m * s.n), 7);
          qnum::gemm_s8_nt(a, b.data(), out.data(), s.m, s.n, s.k);
          return out;
        });
        int bad = 0;
        for (std::int64_t i = 0; i < s.m; ++i)
          for (std::int64_t j = 0; j < s.n; ++j) {
            std::int64_t r = 0;
            for (std::int64_t k = 0; k < s.k; ++k) r += a[i * s.k + k] * b[static_cast<std::size_t>(j * s.k + k)];
            bad += r != c[static_cast<std::size_t>(i * s.n + j)];
          }
        CHECK(bad == 0);
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
        std::vector<std::int32_t> v(c.size(), 9);  // the VNNI kernel itself, whatever gemm_s8_nt ran
        qnum::detail::gemm_s8_vnni(a, b.data(), s.m, s.n, s.k,
                                   [&](std::int64_t row, std::int64_t j, int nr, __m512i lo, __m512i hi) {
                                     const auto [m0, m1] = qnum::detail::column_masks(nr);
                                     _mm512_mask_storeu_epi32(v.data() + row * s.n + j, m0, lo);
                                     _mm512_mask_storeu_epi32(v.data() + row * s.n + j + 16, m1, hi);
                                   });
        CHECK(same_bits(c, v));
#endif
      }
    }
}

TEST_CASE("kernel gemm: int8 weights packed once give gemm_fixed8_nt's bits") {
  // pack_int8_weights: the panels both AMX and VNNI read (K padded to 64), packed once; the
  // packed GEMM must equal the per-call one on every path, scale and shape, with and without bias.
  const std::vector<Shape3> shapes = {{1, 47, 63}, {1, 1, 1}, {5, 33, 65}, {33, 17, 3071}, {70, 47, 128}, {64, 96, 768}};
  for (const auto& s : shapes)
    for (const auto& [Fa, Fb] : {std::pair{4, 7}, std::pair{60, 60}}) {  // 2^-120: the int32 pass
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      CAPTURE(Fa);
      const auto a = rand_s8(static_cast<std::size_t>(s.m * s.k), 31);
      const auto b = rand_s8(static_cast<std::size_t>(s.n * s.k), 32);
      const auto bias = randn(static_cast<std::size_t>(s.n), 33, 1.0f);
      const qnum::Int8Weights w = qnum::pack_int8_weights(b.data(), s.n, s.k);
      CHECK(w.N == s.n);
      CHECK(w.K == s.k);
      CHECK(w.bytes() >= static_cast<std::size_t>(s.n * s.k));
      CHECK(qnum::unpack_int8_weights(w) == b);
      for (const float* pb : {static_cast<const float*>(nullptr), bias.data()}) {
        std::vector<float> want(static_cast<std::size_t>(s.m * s.n), 1.0f);
        qnum::gemm_fixed8_nt(a.data(), Fa, b.data(), Fb, want.data(), s.m, s.n, s.k, pb);
        const auto got = across_threads<float>([&] {
          std::vector<float> out(want.size(), 2.0f);
          qnum::gemm_fixed8_nt(a.data(), Fa, w, Fb, out.data(), s.m, pb);
          return out;
        });
        CHECK(same_bits(got, want));
      }
    }
  CHECK_THROWS_AS(qnum::pack_int8_weights(nullptr, 3, 4), qnum::Error);
  const std::vector<std::int8_t> one(4, 1);
  CHECK_THROWS_AS(qnum::pack_int8_weights(one.data(), 1, qnum::kGemmInt8MaxK + 1), qnum::Error);
}

TEST_CASE("kernel gemm: quantize_fixed8 rounds to nearest even and saturates") {
  const std::vector<float> x = {0.03125f, 0.09375f, -0.03125f, 100.0f, -100.0f, 1.0f};
  const auto k = qnum::quantize_fixed8(x, 4);  // x·16: 0.5 -> 0, 1.5 -> 2, -0.5 -> 0
  CHECK(k == std::vector<std::int8_t>{0, 2, 0, 127, -128, 16});
  CHECK_THROWS_AS(qnum::quantize_fixed8(std::vector<float>{NAN}, 4), qnum::Error);
}

TEST_CASE("kernel gemm: quantize_mxint8 matches MXInt8::from_floats block for block") {
  auto x = randn(32 * 40 + 7, 5, 3.0f);
  x[3] = 0.0f;
  for (int i = 32; i < 64; ++i) x[static_cast<std::size_t>(i)] = 0.0f;         // all-zero block
  for (int i = 64; i < 96; ++i) x[static_cast<std::size_t>(i)] *= 1e-40f;      // subnormal block
  for (int i = 96; i < 128; ++i) x[static_cast<std::size_t>(i)] = 63.5f / 64;  // ties at the top
  x[130] = 1e38f;
  x[200] = NAN;
  const std::int64_t K = static_cast<std::int64_t>(x.size());
  std::vector<qnum::MXInt8> q(static_cast<std::size_t>(qnum::mxint8_blocks(K)));
  qnum::quantize_mxint8(x.data(), 1, K, q.data());
  int bad = 0;
  for (std::int64_t b = 0; b < qnum::mxint8_blocks(K); ++b) {
    std::array<float, 32> blk{};
    for (int t = 0; t < 32 && b * 32 + t < K; ++t)
      blk[static_cast<std::size_t>(t)] = x[static_cast<std::size_t>(b * 32 + t)];
    const auto r = qnum::MXInt8::from_floats(blk);
    bad += r.scale != q[static_cast<std::size_t>(b)].scale;
    if (r.scale != 0xFF) bad += std::memcmp(r.data, q[static_cast<std::size_t>(b)].data, 32) != 0;
  }
  CHECK(bad == 0);
}

TEST_CASE("kernel gemm: mxint8 within gamma_nb of the dequantized reference, identical across threads") {
  for (const auto& s : kShapes) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const std::int64_t nb = qnum::mxint8_blocks(s.k);
    auto xa = randn(static_cast<std::size_t>(s.m * s.k), 6);
    const auto xb = randn(static_cast<std::size_t>(s.n * s.k), 7, 0.05f);
    if (s.k > 40) xa[33] = 1e-3f;  // blocks of very different scales
    std::vector<qnum::MXInt8> qa(static_cast<std::size_t>(s.m * nb)), qb(static_cast<std::size_t>(s.n * nb));
    qnum::quantize_mxint8(xa.data(), s.m, s.k, qa.data());
    qnum::quantize_mxint8(xb.data(), s.n, s.k, qb.data());
    std::vector<float> da(static_cast<std::size_t>(s.m * nb * 32)), db(static_cast<std::size_t>(s.n * nb * 32));
    qnum::dequantize_mxint8(qa.data(), s.m, nb, da.data());
    qnum::dequantize_mxint8(qb.data(), s.n, nb, db.data());
    std::vector<double> ref, absref;
    ref_nt(da, db, s.m, s.n, nb * 32, ref, absref);
    const auto c = across_threads<float>([&] {
      std::vector<float> out(static_cast<std::size_t>(s.m * s.n));
      qnum::gemm_mxint8_nt(qa.data(), qb.data(), out.data(), s.m, s.n, s.k);
      return out;
    });
    int bad = 0;
    for (std::size_t i = 0; i < c.size(); ++i) bad += std::fabs(c[i] - ref[i]) > gamma(nb) * absref[i] + 1e-30;
    CHECK(bad == 0);
    // Bit for bit the documented order (every SIMD path): per chunk of 32 blocks
    // acc = fma(float(d_b), sa·sb, acc), chunks added in order.
    bad = 0;
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        float total = 0.0f;
        for (std::int64_t c0 = 0; c0 < nb; c0 += 32) {
          float acc = 0.0f;
          for (std::int64_t b = c0; b < std::min(nb, c0 + 32); ++b) {
            const auto& x = qa[static_cast<std::size_t>(i * nb + b)];
            const auto& y = qb[static_cast<std::size_t>(j * nb + b)];
            std::int32_t d = 0;
            for (int t = 0; t < 32; ++t) d += static_cast<std::int8_t>(x.data[t]) * static_cast<std::int8_t>(y.data[t]);
            const float sa = std::ldexp(1.0f, x.scale - 133), sb = std::ldexp(1.0f, y.scale - 133);
            acc = std::fma(static_cast<float>(d), sa * sb, acc);
          }
          total += acc;
        }
        bad += std::bit_cast<std::uint32_t>(total) !=
               std::bit_cast<std::uint32_t>(c[static_cast<std::size_t>(i * s.n + j)]);
      }
    CHECK(bad == 0);
    // The on-the-fly activation path gives the same bits.
    std::vector<float> y(c.size());
    qnum::gemm_mxint8_f32_nt(xa.data(), qb.data(), y.data(), s.m, s.n, s.k);
    CHECK(same_bits(c, y));
    // And stays close to the float GEMM of the unquantized operands (sanity of the scales).
    if (s.k >= 64) {
      std::vector<double> r2, a2;
      ref_nt(xa, xb, s.m, s.n, s.k, r2, a2);
      double err = 0, mag = 0;
      for (std::size_t i = 0; i < c.size(); ++i) err += std::fabs(c[i] - r2[i]), mag += a2[i];
      CHECK(err < 0.02 * mag);
    }
  }
}

TEST_CASE("kernel gemm: mxint8 NaN blocks give NaN") {
  std::vector<float> x(64, 1.0f);
  x[5] = NAN;
  std::vector<qnum::MXInt8> q(2);
  qnum::quantize_mxint8(x.data(), 1, 64, q.data());
  CHECK(q[0].scale == 0xFF);
  float c = 0;
  qnum::gemm_mxint8_nt(q.data(), q.data(), &c, 1, 1, 64);
  CHECK(std::isnan(c));
}

TEST_CASE("kernel gemm: binary XNOR-popcount exact, padding bits ignored, identical across threads") {
  for (const auto& s : kShapes) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const auto xa = randn(static_cast<std::size_t>(s.m * s.k), 8);
    const auto xb = randn(static_cast<std::size_t>(s.n * s.k), 9);
    auto pa = qnum::pack_binary(xa.data(), s.m, s.k);
    auto pb = qnum::pack_binary(xb.data(), s.n, s.k);
    if (s.k % 64) {  // garbage in the padding of A only: must not count
      const std::int64_t W = qnum::binary_words(s.k);
      for (std::int64_t i = 0; i < s.m; ++i)
        pa[static_cast<std::size_t>(i * W + W - 1)] |= ~std::uint64_t{0} << (s.k % 64);
    }
    const auto c = across_threads<std::int32_t>([&] {
      std::vector<std::int32_t> out(static_cast<std::size_t>(s.m * s.n));
      qnum::gemm_binary_nt(pa.data(), pb.data(), out.data(), s.m, s.n, s.k);
      return out;
    });
    std::vector<float> sa(xa.size()), sb(xb.size());
    for (std::size_t i = 0; i < xa.size(); ++i) sa[i] = xa[i] >= 0 ? 1.0f : -1.0f;
    for (std::size_t i = 0; i < xb.size(); ++i) sb[i] = xb[i] >= 0 ? 1.0f : -1.0f;
    std::vector<double> ref, absref;
    ref_nt(sa, sb, s.m, s.n, s.k, ref, absref);
    int bad = 0;
    for (std::size_t i = 0; i < c.size(); ++i) bad += static_cast<double>(c[i]) != ref[i];
    CHECK(bad == 0);
    std::vector<float> cf(c.size());
    qnum::gemm_binary_f32_nt(pa.data(), pb.data(), cf.data(), s.m, s.n, s.k);
    bad = 0;
    for (std::size_t i = 0; i < c.size(); ++i) bad += static_cast<double>(cf[i]) != ref[i];
    CHECK(bad == 0);
  }
}

TEST_CASE("kernel gemm: fp32 for every row count of the last strip and every K tail") {
  // M = 1..30 covers each short last strip of the 14-row (AVX-512) register tile twice;
  // N = 47 a full and a partial 32-column panel; K = 16 + 15 the transposed-packing tail.
  for (std::int64_t m = 1; m <= 30; ++m)
    for (std::int64_t k : {1, 15, 16, 31, 260}) {
      const std::int64_t n = 47;
      CAPTURE(m);
      CAPTURE(k);
      const auto a = randn(static_cast<std::size_t>(m * k), 20), b = randn(static_cast<std::size_t>(n * k), 21);
      std::vector<double> ref, absref;
      ref_nt(a, b, m, n, k, ref, absref);
      std::vector<float> c(static_cast<std::size_t>(m * n), -7.0f);
      qnum::gemm_f32_nt(a.data(), b.data(), c.data(), m, n, k);
      int bad = 0;
      for (std::size_t i = 0; i < c.size(); ++i) bad += std::fabs(c[i] - ref[i]) > gamma(k + 1) * absref[i] + 1e-30;
      CHECK(bad == 0);
    }
}

TEST_CASE("kernel gemm: unaligned pointers give the same results") {
  const std::int64_t M = 9, N = 17, K = 70;
  const auto a = randn(static_cast<std::size_t>(M * K), 10), b = randn(static_cast<std::size_t>(N * K), 11);
  std::vector<float> abuf(a.size() + 1), bbuf(b.size() + 3), cbuf(static_cast<std::size_t>(M * N) + 1);
  std::vector<float> c(static_cast<std::size_t>(M * N));
  qnum::gemm_f32_nt(a.data(), b.data(), c.data(), M, N, K);
  // Floats at odd offsets (4-byte aligned, never 64), and int8 at odd byte offsets.
  std::memcpy(abuf.data() + 1, a.data(), a.size() * 4);
  std::memcpy(bbuf.data() + 3, b.data(), b.size() * 4);
  qnum::gemm_f32_nt(abuf.data() + 1, bbuf.data() + 3, cbuf.data() + 1, M, N, K);
  CHECK(std::memcmp(c.data(), cbuf.data() + 1, c.size() * 4) == 0);
  {  // big enough for full panels and register transposes of B, then the NN form
    const std::int64_t m2 = 20, n2 = 70, k2 = 300;
    const auto a2 = randn(static_cast<std::size_t>(m2 * k2), 14), b2 = randn(static_cast<std::size_t>(n2 * k2), 15);
    std::vector<float> c2(static_cast<std::size_t>(m2 * n2)), a2s(a2.size() + 3), b2s(b2.size() + 1),
        c2s(c2.size() + 2);
    qnum::gemm_f32_nt(a2.data(), b2.data(), c2.data(), m2, n2, k2);
    std::memcpy(a2s.data() + 3, a2.data(), a2.size() * 4);
    std::memcpy(b2s.data() + 1, b2.data(), b2.size() * 4);
    qnum::gemm_f32_nt(a2s.data() + 3, b2s.data() + 1, c2s.data() + 2, m2, n2, k2);
    CHECK(std::memcmp(c2.data(), c2s.data() + 2, c2.size() * 4) == 0);
    std::vector<float> bt(b2.size() + 1);
    for (std::int64_t j = 0; j < n2; ++j)
      for (std::int64_t t = 0; t < k2; ++t)
        bt[static_cast<std::size_t>(t * n2 + j) + 1] = b2[static_cast<std::size_t>(j * k2 + t)];
    qnum::gemm_f32_nn(a2s.data() + 3, bt.data() + 1, c2s.data() + 2, m2, n2, k2);
    CHECK(std::memcmp(c2.data(), c2s.data() + 2, c2.size() * 4) == 0);
  }
  const auto ia = rand_s8(static_cast<std::size_t>(M * K), 12), ib = rand_s8(static_cast<std::size_t>(N * K), 13);
  std::vector<std::int8_t> iabuf(ia.size() + 3), ibbuf(ib.size() + 1);
  std::memcpy(iabuf.data() + 3, ia.data(), ia.size());
  std::memcpy(ibbuf.data() + 1, ib.data(), ib.size());
  std::vector<std::int32_t> ic(c.size()), ic2(c.size());
  qnum::gemm_s8_nt(ia.data(), ib.data(), ic.data(), M, N, K);
  qnum::gemm_s8_nt(iabuf.data() + 3, ibbuf.data() + 1, ic2.data(), M, N, K);
  CHECK(ic == ic2);
}

TEST_CASE("kernel gemm: bad input throws qnum::Error") {
  std::vector<float> a(16), b(16), c(16);
  CHECK_THROWS_AS(qnum::gemm_f32_nt(a.data(), b.data(), c.data(), 0, 4, 4), qnum::Error);
  CHECK_THROWS_AS(qnum::gemm_f32_nt(a.data(), b.data(), c.data(), 4, -1, 4), qnum::Error);
  CHECK_THROWS_AS(qnum::gemm_f32_nt(nullptr, b.data(), c.data(), 4, 4, 4), qnum::Error);
  CHECK_THROWS_AS(qnum::gemm_f32_nt(std::span<const float>(a), std::span<const float>(b), std::span<float>(c), 4, 4, 5),
                  qnum::Error);
  std::vector<std::int8_t> ia(16);
  std::vector<std::int32_t> ic(16);
  CHECK_THROWS_AS(qnum::gemm_s8_nt(ia.data(), ia.data(), ic.data(), 1, 1, qnum::kGemmInt8MaxK + 1), qnum::Error);
  CHECK_THROWS_AS(qnum::gemm_s8_nt(ia.data(), ia.data(), ic.data(), 4, 4, 0), qnum::Error);
  std::vector<qnum::MXInt8> q(4);
  CHECK_THROWS_AS(qnum::gemm_mxint8_nt(q.data(), q.data(), c.data(), 0, 1, 32), qnum::Error);
  CHECK_THROWS_AS(qnum::quantize_mxint8(a.data(), 1, 0, q.data()), qnum::Error);
  std::vector<std::uint64_t> w(4);
  CHECK_THROWS_AS(qnum::gemm_binary_nt(w.data(), w.data(), ic.data(), 1, 1, 0), qnum::Error);
  CHECK_THROWS_AS(qnum::pack_binary(a.data(), 1, -3), qnum::Error);
}

TEST_CASE("kernel gemm: bf16 NT, NN and TN equal the scalar bf16 reference bit for bit, on any thread count") {
  MESSAGE("bf16 GEMM path: " << std::string(qnum::bf16_engine()));
  std::vector<Shape3> shapes = kShapes;
  shapes.push_back({1, 768, 3071});  // M = 1, K odd and past every tile
  shapes.push_back({33, 47, 2});     // odd N: a lone 16-column panel
  shapes.push_back({9, 17, 3});
  for (const auto& s : shapes) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    const auto a = randn(static_cast<std::size_t>(s.m * s.k), 11);
    const auto b = randn(static_cast<std::size_t>(s.n * s.k), 12);
    const auto ref = bf16_reference_nt(a, b, s.m, s.n, s.k);
    const auto c = across_threads<float>([&] {
      std::vector<float> out(ref.size(), -7.0f);
      qnum::gemm_bf16_nt(a.data(), b.data(), out.data(), s.m, s.n, s.k);
      return out;
    });
    CHECK(same_bits(c, ref));
    const auto bt = transposed(b, s.n, s.k), at = transposed(a, s.m, s.k);
    std::vector<float> cnn(ref.size()), ctn(ref.size());
    qnum::gemm_bf16_nn(a.data(), bt.data(), cnn.data(), s.m, s.n, s.k);
    qnum::gemm_bf16_tn(at.data(), bt.data(), ctn.data(), s.m, s.n, s.k);
    CHECK(same_bits(cnn, ref));
    CHECK(same_bits(ctn, ref));
    std::vector<float> bias(static_cast<std::size_t>(s.n)), cb(ref.size());
    for (std::size_t j = 0; j < bias.size(); ++j) bias[j] = 0.25f * static_cast<float>(j % 7) - 0.5f;
    qnum::gemm_bf16_nt_bias(a.data(), b.data(), bias.data(), cb.data(), s.m, s.n, s.k);
    int bad = 0;
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        const auto q = static_cast<std::size_t>(i * s.n + j);
        bad += std::bit_cast<std::uint32_t>(cb[q]) != std::bit_cast<std::uint32_t>(ref[q] + bias[static_cast<std::size_t>(j)]);
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("kernel gemm: the two bf16 chains are vdpbf16ps's pairs and TDPBF16PS's even/odd chains per 32 values") {
  // pairs: pair 0 gives 1, then 1 + 2^30 loses the 1, and -2^30 cancels: 0. tiles: the even
  // chain cancels 2^30 - 2^30 = 0, the odd chain keeps 1 + 0: 1.
  const std::vector<std::uint16_t> a = {qnum::bf16_operand(0x1p30f), qnum::bf16_operand(1.0f),
                                        qnum::bf16_operand(-0x1p30f), 0};
  const std::vector<std::uint16_t> ones(4, qnum::bf16_operand(1.0f));
  CHECK(qnum::bf16_dot(a.data(), ones.data(), 4, qnum::Bf16Chain::pairs) == 0.0f);
  CHECK(qnum::bf16_dot(a.data(), ones.data(), 4, qnum::Bf16Chain::tiles) == 1.0f);
  // Across blocks the tiles chain adds each block's sum to the running one: 2^30 in block 0,
  // then block 1's 1 (lost) and -2^30 (cancels), summed first to -2^30 + 1 -> -2^30: 0.
  std::vector<std::uint16_t> x(64, 0), y(64, qnum::bf16_operand(1.0f));
  x[0] = qnum::bf16_operand(0x1p30f), x[32] = qnum::bf16_operand(1.0f), x[34] = qnum::bf16_operand(-0x1p30f);
  CHECK(qnum::bf16_dot(x.data(), y.data(), 64, qnum::Bf16Chain::tiles) == 0.0f);
  // The GEMM runs the chain bf16_gemm_chain() names (tiles only where AMX is enabled).
  MESSAGE("bf16 chain: " << std::string(qnum::bf16_gemm_chain() == qnum::Bf16Chain::tiles ? "tiles (AMX)" : "pairs"));
  const std::vector<float> af = {0x1p30f, 1.0f, -0x1p30f, 0.0f}, bf = {1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> c(1);
  qnum::gemm_bf16_nt(af.data(), bf.data(), c.data(), 1, 1, 4);
  CHECK(c[0] == (qnum::bf16_gemm_chain() == qnum::Bf16Chain::tiles ? 1.0f : 0.0f));
  if (qnum::kernel::kAmxCompiled && !qnum::kernel::amx_enabled())
    MESSAGE("AMX compiled in but not enabled here (CPU, OS or QNUM_MAX_ISA): the AMX kernels did not run");
}

TEST_CASE("kernel gemm: bf16 operands round to nearest even; subnormals, signed zeros and the pad follow vdpbf16ps") {
  // Rounding: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 and goes to even (1); 1 + 3·2^-9 rounds up.
  CHECK(qnum::bf16_operand(1.0f + 0x1p-8f) == 0x3F80);
  CHECK(qnum::bf16_operand(1.0f + 3 * 0x1p-9f) == 0x3F81);
  CHECK(qnum::bf16_operand(-0x1p-130f) == 0x8000);  // subnormal -> signed zero (DAZ)
  CHECK(qnum::bf16_operand(std::numeric_limits<float>::quiet_NaN()) == 0x7FC0);
  // pairs: odd element of each pair first: pair 0 leaves 2^30; then (2^30 + 1) loses the 1
  // before -2^30 cancels, giving 0 (the even-first order would cancel first and keep the 1).
  // tiles: even chain 0 - 2^30, odd chain 2^30 + 1 -> 2^30, summed: 0 as well.
  const std::vector<float> a = {0.0f, 0x1p30f, -0x1p30f, 1.0f}, b = {1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> c(1);
  qnum::gemm_bf16_nt(a.data(), b.data(), c.data(), 1, 1, 4);
  CHECK(c[0] == 0.0f);
  // Products that underflow flush to zero: 2^-70 · 2^-70 = 2^-140, subnormal in fp32.
  const std::vector<float> u = {0x1p-70f}, v = {0x1p-70f};
  qnum::gemm_bf16_nt(u.data(), v.data(), c.data(), 1, 1, 1);
  CHECK(std::bit_cast<std::uint32_t>(c[0]) == 0u);
  // Random operands across the whole exponent range, subnormal products and sums included.
  std::mt19937 g(5);
  std::uniform_int_distribution<std::uint32_t> w;
  for (std::int64_t K : {1, 2, 3, 8, 33}) {
    const std::int64_t M = 5, N = 19;
    std::vector<float> x(static_cast<std::size_t>(M * K)), y(static_cast<std::size_t>(N * K));
    const auto draw = [&] {  // exponents 2^-126 .. 2^-20 and 2^60 .. 2^90, mostly finite
      const std::uint32_t e = w(g) % 2 ? 1 + w(g) % 106 : 187 + w(g) % 30;
      return std::bit_cast<float>((w(g) & 0x80000000u) | (e << 23) | (w(g) & 0x7FFFFFu));
    };
    for (auto& q : x) q = draw();
    for (auto& q : y) q = draw();
    std::vector<float> out(static_cast<std::size_t>(M * N));
    qnum::gemm_bf16_nt(x.data(), y.data(), out.data(), M, N, K);
    CAPTURE(K);
    CHECK(same_bits(out, bf16_reference_nt(x, y, M, N, K)));
  }
}
