// Softmax and attention kernels: the vector exp against the correctly rounded exp, softmax
// against a double reference, naive attention against a double reference, fused against
// naive within the documented tolerance, masks (including fully masked rows), thread
// determinism and bad input.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "qnum/kernel/attention.hpp"
#include "qnum/kernel/softmax.hpp"
#include "kernel/helpers.hpp"

using qnum_test::randn;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

/// Restores the process thread setting after a test changes it.
struct ThreadGuard {
  int saved = qnum::detail::thread_setting();
  ~ThreadGuard() { qnum::detail::thread_setting() = saved; }
};

/// Distance in representable floats between two finite floats of the same sign.
std::int64_t ulp_distance(float a, float b) {
  const auto key = [](float x) {
    const auto u = static_cast<std::int64_t>(std::bit_cast<std::uint32_t>(x));
    return (u & 0x80000000) ? -(u & 0x7fffffff) : u;
  };
  return std::llabs(key(a) - key(b));
}

/// Double-precision attention with the same conventions (fully masked rows give zeros).
std::vector<double> reference_attention(const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, const float* mask, const qnum::AttentionShape& s) {
  const std::int64_t sq = s.seq_q, sk = s.seq_k, d = s.head_dim;
  std::vector<double> out(static_cast<std::size_t>(s.q_size()));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> sc(static_cast<std::size_t>(sk));
  for (std::int64_t bh = 0; bh < s.batch * s.heads; ++bh) {
    const std::int64_t b = bh / s.heads;
    for (std::int64_t i = 0; i < sq; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = 0; j < sk; ++j) {
        double acc = 0;
        for (std::int64_t t = 0; t < d; ++t)
          acc += static_cast<double>(q[(bh * sq + i) * d + t]) * k[(bh * sk + j) * d + t];
        sc[j] = acc * scale + (mask ? mask[b * sk + j] : 0.0);
        mx = std::max(mx, sc[j]);
      }
      double* o = out.data() + (bh * sq + i) * d;
      if (mx == -std::numeric_limits<double>::infinity()) continue;  // zeros
      double sum = 0;
      for (std::int64_t j = 0; j < sk; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
      for (std::int64_t j = 0; j < sk; ++j)
        for (std::int64_t t = 0; t < d; ++t) o[t] += sc[j] / sum * v[(bh * sk + j) * d + t];
    }
  }
  return out;
}

/// Largest |a - b| relative to max|V| of each (batch, head); the documented bound is 1e-5.
template <class A, class B>
double max_rel_error(const A& a, const B& b, const std::vector<float>& v, const qnum::AttentionShape& s) {
  double worst = 0;
  const std::int64_t per_o = s.seq_q * s.head_dim, per_v = s.seq_k * s.head_dim;
  for (std::int64_t bh = 0; bh < s.batch * s.heads; ++bh) {
    double vmax = 0;
    for (std::int64_t i = 0; i < per_v; ++i) vmax = std::max(vmax, std::fabs(double(v[bh * per_v + i])));
    vmax = std::max(vmax, 1e-30);
    for (std::int64_t i = 0; i < per_o; ++i)
      worst = std::max(worst, std::fabs(double(a[bh * per_o + i]) - double(b[bh * per_o + i])) / vmax);
  }
  return worst;
}

struct Problem {
  qnum::AttentionShape s;
  std::vector<float> q, k, v, mask;
  Problem(qnum::AttentionShape shape, std::uint32_t seed, float sd = 1.0f) : s(shape) {
    q = randn(static_cast<std::size_t>(s.q_size()), seed, sd);
    k = randn(static_cast<std::size_t>(s.kv_size()), seed + 1, sd);
    v = randn(static_cast<std::size_t>(s.kv_size()), seed + 2);
  }
  const float* m() const { return mask.empty() ? nullptr : mask.data(); }
  std::vector<float> naive() const {
    std::vector<float> o(static_cast<std::size_t>(s.q_size()));
    qnum::attention_naive(q, k, v, mask, o, s);
    return o;
  }
  std::vector<float> fused() const {
    std::vector<float> o(static_cast<std::size_t>(s.q_size()));
    qnum::attention_fused(q, k, v, mask, o, s);
    return o;
  }
};

/// BERT-style padding mask: batch b keeps its first lengths[b] keys.
std::vector<float> padding_mask(std::int64_t batch, std::int64_t sk, float value) {
  std::vector<float> m(static_cast<std::size_t>(batch * sk), 0.0f);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = b % 3 == 2 ? 0 : std::max<std::int64_t>(1, sk - (b * 5) % sk);
    for (std::int64_t j = len; j < sk; ++j) m[b * sk + j] = value;
  }
  return m;
}

}  // namespace

TEST_CASE("kernel softmax: vector exp within 2 ulp of the correctly rounded exp") {
  std::int64_t worst = 0;
  float worst_x = 0;
  std::vector<float> xs;
  // Every binade of [-104, 89], every 211th float (about 10.6M values).
  for (std::uint32_t u = 0; u < 0x42d00000u; u += 211) {
    const float x = std::bit_cast<float>(u);
    if (x < 89.0f) xs.push_back(x);
    xs.push_back(-x);
  }
  std::vector<float> ys(xs.size());
  constexpr std::int64_t w = qnum::detail::kFloatLanes;
  std::size_t i = 0;
  for (; i + w <= xs.size(); i += w)
    qnum::detail::exp_batch(qnum::detail::FloatBatch::load_unaligned(xs.data() + i)).store_unaligned(ys.data() + i);
  for (; i < xs.size(); ++i) ys[i] = qnum::detail::exp_scalar(xs[i]);
  for (std::size_t n = 0; n < xs.size(); ++n) {
    const float want = static_cast<float>(std::exp(static_cast<double>(xs[n])));
    if (std::isinf(want)) {
      if (!std::isinf(ys[n])) worst = std::max<std::int64_t>(worst, 1000);
      continue;
    }
    const std::int64_t dist = ulp_distance(ys[n], want);
    if (dist > worst) worst = dist, worst_x = xs[n];
  }
  INFO("worst x = ", worst_x);
  CHECK(worst <= 2);
  MESSAGE("exp_batch: worst error ", worst, " ulp (at x = ", worst_x, ") over ", xs.size(), " inputs");
  CHECK(qnum::detail::exp_scalar(0.0f) == 1.0f);
  CHECK(qnum::detail::exp_scalar(-kInf) == 0.0f);
  CHECK(qnum::detail::exp_scalar(kInf) == kInf);
  CHECK(qnum::detail::exp_scalar(89.0f) == kInf);
  CHECK(qnum::detail::exp_scalar(-120.0f) == 0.0f);
  CHECK(std::isnan(qnum::detail::exp_scalar(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("kernel softmax: matches a double reference and rows sum to 1") {
  for (std::int64_t cols : {1, 7, 16, 33, 100, 1000, 4099}) {
    for (float sd : {1.0f, 30.0f}) {
      const std::int64_t rows = 13;
      auto x = randn(static_cast<std::size_t>(rows * cols), static_cast<std::uint32_t>(cols), sd);
      std::vector<float> y(x.size()), ly(x.size());
      qnum::softmax(x, y, rows, cols);
      qnum::log_softmax(x, ly, rows, cols);
      double worst_rel = 0, worst_sum = 0, worst_log = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        double mx = -1e300, sum = 0, ysum = 0;
        for (std::int64_t j = 0; j < cols; ++j) mx = std::max(mx, double(x[r * cols + j]));
        for (std::int64_t j = 0; j < cols; ++j) sum += std::exp(double(x[r * cols + j]) - mx);
        for (std::int64_t j = 0; j < cols; ++j) {
          const double want = std::exp(double(x[r * cols + j]) - mx) / sum;
          const double got = y[r * cols + j];
          ysum += got;
          // Bound: 4 ulp, the rounding of x - max (relative 6e-8 * |x - max| after exp) and
          // the float row sum (6e-8 per element a SIMD lane adds).
          const double bound = 4.8e-7 + 6e-8 * (mx - x[r * cols + j]) + 6e-8 * double(cols) / 16;
          if (want > 1e-30) worst_rel = std::max(worst_rel, std::fabs(got - want) / want / bound);
          const double lwant = double(x[r * cols + j]) - mx - std::log(sum);
          worst_log = std::max(worst_log, std::fabs(ly[r * cols + j] - lwant) / std::max(1.0, std::fabs(lwant)));
        }
        worst_sum = std::max(worst_sum, std::fabs(ysum - 1.0));
      }
      INFO("cols ", cols, " sd ", sd);
      CHECK(worst_rel <= 1.0);  // relative to the bound
      CHECK(worst_sum <= double(cols) * 6e-8 + 1e-7);
      CHECK(worst_log <= 4e-7);
    }
  }
}

TEST_CASE("kernel softmax: masked entries get zero weight, fully masked rows are defined") {
  const std::int64_t rows = 3, cols = 37;
  auto x = randn(rows * cols, 5);
  for (std::int64_t j = 0; j < cols; j += 3) x[j] = -kInf;      // row 0: every third masked
  for (std::int64_t j = 0; j < cols; ++j) x[cols + j] = -kInf;  // row 1: fully masked
  std::vector<float> y(x.size()), ly(x.size());
  qnum::softmax(x, y, rows, cols);
  qnum::log_softmax(x, ly, rows, cols);
  double s0 = 0;
  for (std::int64_t j = 0; j < cols; ++j) {
    if (j % 3 == 0) {
      CHECK(y[j] == 0.0f);
      CHECK(ly[j] == -kInf);
    }
    s0 += y[j];
    CHECK(y[cols + j] == 0.0f);
    CHECK(ly[cols + j] == -kInf);
  }
  CHECK(std::fabs(s0 - 1.0) < 1e-6);
  // A NaN or +inf entry makes its row NaN.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf}) {
    auto xb = x;
    xb[2 * cols + 20] = bad;
    std::vector<float> yb(xb.size()), lb(xb.size());
    qnum::softmax(xb, yb, rows, cols);
    qnum::log_softmax(xb, lb, rows, cols);
    bool all_nan = true;
    for (std::int64_t j = 0; j < cols; ++j)
      all_nan = all_nan && std::isnan(yb[2 * cols + j]) && std::isnan(lb[2 * cols + j]);
    CHECK(all_nan);
  }
  // In place gives the same bits.
  auto z = x;
  qnum::softmax(z.data(), z.data(), rows, cols);
  CHECK(std::memcmp(z.data(), y.data(), y.size() * sizeof(float)) == 0);
}

TEST_CASE("kernel softmax: unaligned buffers, thread independence and bad input") {
  ThreadGuard guard;
  const std::int64_t rows = 301, cols = 129;
  auto x = randn(rows * cols + 1, 9, 5.0f);
  std::vector<float> ref(rows * cols), y(rows * cols + 1);
  qnum::set_num_threads(1);
  qnum::softmax(x.data(), ref.data(), rows, cols);
  for (int t : {2, 3}) {
    qnum::set_num_threads(t);
    std::vector<float> o(rows * cols);
    qnum::softmax(x.data(), o.data(), rows, cols);
    CHECK(std::memcmp(o.data(), ref.data(), ref.size() * sizeof(float)) == 0);
  }
  qnum::softmax(x.data() + 1, y.data() + 1, rows, cols);  // unaligned
  for (std::int64_t j = 0; j < cols; ++j) CHECK(std::isfinite(y[1 + j]));
  std::vector<float> a(6), b(6);
  CHECK_THROWS_AS(qnum::softmax(a, b, 0, 6), qnum::Error);
  CHECK_THROWS_AS(qnum::softmax(a, b, 6, 0), qnum::Error);
  CHECK_THROWS_AS(qnum::softmax(a, b, 2, 4), qnum::Error);
  CHECK_THROWS_AS(qnum::log_softmax(a, std::span<float>(b).first(5), 2, 3), qnum::Error);
  CHECK_THROWS_AS(qnum::softmax(nullptr, b.data(), 2, 3), qnum::Error);
}

TEST_CASE("kernel attention: naive and fused match a double reference") {
  for (auto s : {qnum::AttentionShape{2, 3, 7, 7, 16}, qnum::AttentionShape{1, 2, 64, 64, 64},
                 qnum::AttentionShape{2, 1, 129, 129, 80}, qnum::AttentionShape{1, 1, 5, 70, 64},
                 qnum::AttentionShape{1, 2, 1, 1, 64}, qnum::AttentionShape{2, 2, 50, 19, 3},
                 qnum::AttentionShape{1, 1, 33, 200, 100}, qnum::AttentionShape{1, 1, 3, 3, 1}}) {
    for (bool masked : {false, true}) {
      Problem p(s, 11);
      if (masked) p.mask = padding_mask(s.batch, s.seq_k, -kInf);
      const auto ref = reference_attention(p.q, p.k, p.v, p.m(), s);
      INFO("seq_q ", s.seq_q, " seq_k ", s.seq_k, " d ", s.head_dim, " masked ", masked);
      CHECK(max_rel_error(p.naive(), ref, p.v, s) <= 1e-5);
      CHECK(max_rel_error(p.fused(), ref, p.v, s) <= 1e-5);
    }
  }
}

TEST_CASE("kernel attention: fused equals naive within 1e-5 * max|V| across shapes") {
  double worst = 0;
  for (std::int64_t seq : {1, 7, 64, 129, 512}) {
    for (std::int64_t d : {16, 64, 80}) {
      if (seq == 512 && d != 64) continue;  // keep the run short
      for (int mode = 0; mode < 4; ++mode) {
        const qnum::AttentionShape s{3, 2, seq, seq, d};
        // mode 0: no mask; 1: -inf padding mask (batch 2 fully masked); 2: BERT's -10000;
        // 3: wide scores (sd 3 inputs: scores up to ~±40) with -FLT_MAX padding.
        Problem p(s, static_cast<std::uint32_t>(seq * 100 + d + mode), mode == 3 ? 2.0f : 1.0f);
        if (mode == 1) p.mask = padding_mask(s.batch, seq, -kInf);
        if (mode == 2) p.mask = padding_mask(s.batch, seq, -10000.0f);
        if (mode == 3) p.mask = padding_mask(s.batch, seq, -std::numeric_limits<float>::max());
        const auto a = p.naive(), b = p.fused();
        bool finite = true;
        for (float x : a) finite = finite && std::isfinite(x);
        for (float x : b) finite = finite && std::isfinite(x);
        // Batch 2 is fully masked. With BERT's finite -10000 its scores are s - 10000 rounded
        // to ulp(10000) ~ 1e-3, so a 1-ulp difference in s can move a weight by 1e-3: that
        // row is ill-conditioned by construction, bound 2 * ulp(10000) * max|V|.
        const std::int64_t per = 2 * s.heads * seq * d;
        const double e = mode == 2 ? max_rel_error(std::span<const float>(a).first(per),
                                                   std::span<const float>(b).first(per), p.v, {2, 2, seq, seq, d})
                                   : max_rel_error(a, b, p.v, s);
        worst = std::max(worst, e);
        INFO("seq ", seq, " d ", d, " mode ", mode);
        CHECK(finite);
        CHECK(e <= 1e-5);
        if (mode == 2) CHECK(max_rel_error(a, b, p.v, s) <= 2e-3);
      }
    }
  }
  MESSAGE("worst |fused - naive| / max|V| = ", worst);
}

TEST_CASE("kernel attention: masked keys get zero weight and fully masked rows give zeros") {
  const qnum::AttentionShape s{3, 2, 33, 33, 64};
  Problem p(s, 21);
  p.mask = padding_mask(s.batch, s.seq_k, -kInf);  // batch 2 is fully masked
  // Poison the values of masked keys: any nonzero weight would show.
  for (std::int64_t bh = 0; bh < s.batch * s.heads; ++bh)
    for (std::int64_t j = 0; j < s.seq_k; ++j)
      if (p.mask[(bh / s.heads) * s.seq_k + j] != 0.0f)
        for (std::int64_t t = 0; t < s.head_dim; ++t) p.v[(bh * s.seq_k + j) * s.head_dim + t] = 1e30f;
  const auto a = p.naive(), b = p.fused();
  // Reference over the unmasked keys only (value poisoning excluded from max|V| by using a
  // copy with the poisoned rows zeroed).
  auto vclean = p.v;
  for (auto& x : vclean)
    if (x == 1e30f) x = 0.0f;
  const auto ref = reference_attention(p.q, p.k, vclean, p.m(), s);
  CHECK(max_rel_error(a, ref, vclean, s) <= 1e-5);
  CHECK(max_rel_error(b, ref, vclean, s) <= 1e-5);
  const std::int64_t per = s.heads * s.seq_q * s.head_dim;
  for (std::int64_t i = 2 * per; i < 3 * per; ++i) {
    REQUIRE(a[i] == 0.0f);
    REQUIRE(b[i] == 0.0f);
  }
}

TEST_CASE("kernel attention: fused handles key blocks that are wholly masked and odd tile edges") {
  // The fused kernel takes keys in blocks of 8 score tiles (256 keys with AVX-512) and query
  // rows in groups (14 with AVX-512): masks that remove whole blocks first or last, rows
  // whose first block is fully masked, and sizes one past the block and group edges.
  for (auto s : {qnum::AttentionShape{4, 2, 29, 600, 64}, qnum::AttentionShape{4, 1, 43, 257, 48},
                 qnum::AttentionShape{4, 1, 15, 513, 16}, qnum::AttentionShape{4, 1, 1, 256, 96}}) {
    Problem p(s, 51);
    p.mask.assign(static_cast<std::size_t>(s.batch * s.seq_k), 0.0f);
    for (std::int64_t j = 0; j < s.seq_k; ++j) {
      if (j < s.seq_k / 2) p.mask[j] = -kInf;                 // batch 0: first half masked
      if (j >= s.seq_k / 2) p.mask[s.seq_k + j] = -kInf;      // batch 1: second half masked
      if (j % 2) p.mask[2 * s.seq_k + j] = -kInf;             // batch 2: every other key
      if (j != s.seq_k - 1) p.mask[3 * s.seq_k + j] = -kInf;  // batch 3: only the last key
    }
    const auto ref = reference_attention(p.q, p.k, p.v, p.m(), s);
    INFO("seq_q ", s.seq_q, " seq_k ", s.seq_k, " d ", s.head_dim);
    CHECK(max_rel_error(p.fused(), ref, p.v, s) <= 1e-5);
    CHECK(max_rel_error(p.naive(), ref, p.v, s) <= 1e-5);
  }
}

TEST_CASE("kernel softmax: exp_nonpositive matches exp_batch on x <= 0") {
  std::int64_t worst = 0;
  std::vector<float> xs;
  for (std::uint32_t u = 0; u < 0x42e00000u; u += 97) xs.push_back(-std::bit_cast<float>(u));  // [-112, 0]
  xs.push_back(-kInf);
  while (xs.size() % qnum::detail::kFloatLanes) xs.push_back(0.0f);
  for (std::size_t i = 0; i < xs.size(); i += qnum::detail::kFloatLanes) {
    alignas(64) float a[qnum::detail::kFloatLanes], b[qnum::detail::kFloatLanes];
    const auto x = qnum::detail::FloatBatch::load_unaligned(xs.data() + i);
    qnum::detail::exp_nonpositive(x).store_aligned(a);
    qnum::detail::exp_batch(x).store_aligned(b);
    for (std::int64_t l = 0; l < qnum::detail::kFloatLanes; ++l) {
      if (xs[i + l] < -103.98f || b[l] == 0.0f) {
        REQUIRE(a[l] <= std::numeric_limits<float>::denorm_min());  // underflow to 0 (or the last subnormal)
        continue;
      }
      worst = std::max(worst, ulp_distance(a[l], b[l]));
    }
  }
  CHECK(worst <= 1);
  CHECK(qnum::detail::exp_nonpositive(qnum::detail::FloatBatch(0.0f)).get(0) == 1.0f);
  CHECK(qnum::detail::exp_nonpositive(qnum::detail::FloatBatch(-kInf)).get(0) == 0.0f);
}

TEST_CASE("kernel attention: results are bit-identical for 1, 2 and 3 threads") {
  ThreadGuard guard;
  for (auto s : {qnum::AttentionShape{2, 3, 100, 100, 64}, qnum::AttentionShape{1, 1, 300, 300, 80}}) {
    Problem p(s, 31);
    p.mask = padding_mask(s.batch, s.seq_k, -kInf);
    qnum::set_num_threads(1);
    const auto a1 = p.naive(), b1 = p.fused();
    for (int t : {2, 3}) {
      qnum::set_num_threads(t);
      const auto a = p.naive(), b = p.fused();
      CHECK(std::memcmp(a.data(), a1.data(), a1.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(b.data(), b1.data(), b1.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("kernel attention: unaligned pointers work") {
  const qnum::AttentionShape s{1, 2, 45, 45, 64};
  Problem p(s, 41);
  const auto want_f = p.fused(), want_n = p.naive();
  auto shifted = [](const std::vector<float>& x) {
    std::vector<float> y(x.size() + 1);
    std::copy(x.begin(), x.end(), y.begin() + 1);
    return y;
  };
  const auto q = shifted(p.q), k = shifted(p.k), v = shifted(p.v);
  std::vector<float> o(static_cast<std::size_t>(s.q_size()) + 1);
  qnum::attention_fused(q.data() + 1, k.data() + 1, v.data() + 1, nullptr, o.data() + 1, s);
  CHECK(std::memcmp(o.data() + 1, want_f.data(), want_f.size() * sizeof(float)) == 0);
  qnum::attention_naive(q.data() + 1, k.data() + 1, v.data() + 1, nullptr, o.data() + 1, s);
  CHECK(max_rel_error(std::span<const float>(o).subspan(1), want_n, p.v, s) <= 1e-6);
}

TEST_CASE("kernel attention: bad input is a qnum::Error") {
  const qnum::AttentionShape s{1, 2, 4, 4, 8};
  std::vector<float> q(64), k(64), v(64), m(4), o(64);
  using Fn = void (*)(std::span<const float>, std::span<const float>, std::span<const float>, std::span<const float>,
                      std::span<float>, const qnum::AttentionShape&);
  const Fn fused = [](std::span<const float> q, std::span<const float> k, std::span<const float> v,
                      std::span<const float> m, std::span<float> o, const qnum::AttentionShape& s) {
    qnum::attention_fused(q, k, v, m, o, s);  // the default (heads-major) layout
  };
  for (Fn f : {static_cast<Fn>(qnum::attention_naive), fused}) {
    CHECK_NOTHROW(f(q, k, v, m, o, s));
    CHECK_NOTHROW(f(q, k, v, {}, o, s));
    CHECK_THROWS_AS(f(q, k, v, m, o, {1, 2, 4, 4, 0}), qnum::Error);   // head_dim 0
    CHECK_THROWS_AS(f(q, k, v, m, o, {0, 2, 4, 4, 8}), qnum::Error);   // batch 0
    CHECK_THROWS_AS(f(q, k, v, m, o, {1, 2, 0, 4, 8}), qnum::Error);   // seq 0
    CHECK_THROWS_AS(f(q, k, v, m, o, {1, -2, 4, 4, 8}), qnum::Error);  // negative
    CHECK_THROWS_AS(f(std::span<const float>(q).first(63), k, v, m, o, s), qnum::Error);
    CHECK_THROWS_AS(f(q, std::span<const float>(k).first(32), v, m, o, s), qnum::Error);
    CHECK_THROWS_AS(f(q, k, std::span<const float>(v).first(60), m, o, s), qnum::Error);
    CHECK_THROWS_AS(f(q, k, v, std::span<const float>(m).first(3), o, s), qnum::Error);
    CHECK_THROWS_AS(f(q, k, v, m, std::span<float>(o).first(8), s), qnum::Error);
    CHECK_THROWS_AS(f(q, k, v, m, o, {1, 2, 4, 8, 8}), qnum::Error);  // k/v sizes vs seq_k
  }
  CHECK_THROWS_AS(qnum::attention_fused(nullptr, k.data(), v.data(), nullptr, o.data(), s), qnum::Error);
  CHECK_THROWS_AS(qnum::attention_naive(q.data(), k.data(), v.data(), nullptr, nullptr, s), qnum::Error);
}

TEST_CASE("kernel attention: token-major layout gives the heads-major result bit for bit") {
  // [B, H, S, D] <-> [B, S, H, D]
  auto to_token_major = [](const std::vector<float>& x, std::int64_t B, std::int64_t H, std::int64_t S,
                           std::int64_t D) {
    std::vector<float> y(x.size());
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t t = 0; t < S; ++t)
          for (std::int64_t c = 0; c < D; ++c)
            y[static_cast<std::size_t>(((b * S + t) * H + h) * D + c)] =
                x[static_cast<std::size_t>(((b * H + h) * S + t) * D + c)];
    return y;
  };
  for (const auto& s : {qnum::AttentionShape{3, 2, 70, 70, 64}, qnum::AttentionShape{2, 3, 1, 45, 16},
                        qnum::AttentionShape{2, 4, 33, 17, 80}}) {
    Problem p(s, static_cast<std::uint32_t>(s.seq_q * 7 + s.seq_k + s.head_dim));
    p.mask = padding_mask(s.batch, s.seq_k, -kInf);
    const auto ref = p.fused();
    const auto q = to_token_major(p.q, s.batch, s.heads, s.seq_q, s.head_dim);
    const auto k = to_token_major(p.k, s.batch, s.heads, s.seq_k, s.head_dim);
    const auto v = to_token_major(p.v, s.batch, s.heads, s.seq_k, s.head_dim);
    std::vector<float> out(ref.size());
    qnum::attention_fused(q, k, v, p.mask, out, s, qnum::AttentionLayout::token_major);
    const auto want = to_token_major(ref, s.batch, s.heads, s.seq_q, s.head_dim);
    CHECK(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)) == 0);
  }
}
