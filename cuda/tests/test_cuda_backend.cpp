// The CUDA tensor backend (qnum::DeviceBackend, qnum/cuda/backend.hpp) against the CPU: every
// method on seeded random inputs at small and BERT-like sizes (rows off multiples of 32, odd
// sequence lengths), results and gradients compared with the header-only library's own ops
// and their autograd. Bit for bit where the contract says so (dropout masks, adam_step,
// quantize, permute, elementwise arithmetic, embedding lookup, the MXINT8 packing); elsewhere
// within the tolerances stated at each check (docs/cuda.md, "Tensor backend").
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compare.hpp"
#include "qnum/core/rng.hpp"
#include "qnum/cuda/backend.hpp"
#include "qnum/format/families.hpp"
#include "qnum/format/format.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/kernel/quantize.hpp"
#include "qnum/nn/optim.hpp"
#include "qnum/tensor/ops.hpp"
#include "qnum/tensor/ops_attention.hpp"

using namespace qnum::cuda::test;
using qnum::DeviceBackend;
using qnum::Tensor;

namespace {

DeviceBackend& be() { return qnum::cuda::tensor_backend(); }

/// Device memory of n values of T through the backend's own allocator.
template <class T>
class Dev {
 public:
  explicit Dev(std::size_t n) : n_(n), p_(static_cast<T*>(be().allocate(std::max<std::size_t>(n, 1) * sizeof(T)))) {}
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) { be().copy_to_device(p_, v.data(), v.size() * sizeof(T)); }
  explicit Dev(std::span<const T> v) : Dev(std::vector<T>(v.begin(), v.end())) {}
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { be().deallocate(p_); }
  T* get() const { return p_; }
  std::vector<T> host() const {
    std::vector<T> v(n_);
    be().copy_to_host(v.data(), p_, n_ * sizeof(T));
    return v;
  }

 private:
  std::size_t n_;
  T* p_;
};

std::vector<float> vec(const Tensor& t) { return t.to_vector(); }
std::vector<float> grad(const Tensor& t) { return {t.grad().begin(), t.grad().end()}; }

std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  return Tensor::randn({static_cast<std::int64_t>(n)}, seed, 0.0f, scale).to_vector();
}

/// |gpu - cpu| <= rtol·|cpu| + atol_frac·max|cpu| per element (atol relative to the array's
/// largest magnitude, so cancellations near zero do not fail a correct kernel).
void require_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double rtol, double atol_frac,
                   const std::string& what) {
  REQUIRE(gpu.size() == cpu.size());
  double mx = 0.0;
  for (float c : cpu) mx = std::max(mx, std::fabs(static_cast<double>(c)));
  const double atol = atol_frac * mx;
  int bad = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double d = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
    const bool ok = d <= rtol * std::fabs(static_cast<double>(cpu[i])) + atol || (std::isnan(gpu[i]) && std::isnan(cpu[i]));
    worst = std::max(worst, d);
    if (!ok && bad++ < 5) FAIL_CHECK(what << ": element " << i << " gpu " << gpu[i] << " cpu " << cpu[i] << " diff " << d);
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << gpu.size() << " outside tolerance (worst abs diff " << worst
                               << ", max |cpu| " << mx << ")");
}

template <class T>
void require_equal(const std::vector<T>& gpu, const std::vector<T>& cpu, const std::string& what) {
  REQUIRE(gpu.size() == cpu.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (gpu[i] != cpu[i] && bad++ == 0) first = i;
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << gpu.size() << " differ, first at " << first);
}

}  // namespace

TEST_CASE("backend: name, memory round trip, fill, peak tracking and out-of-memory") {
  REQUIRE(be().device_count() > 0);
  CHECK(be().name().find("cuda:0") != std::string::npos);
  const auto x = randn(1037, 1);
  Dev<float> a(x), b(x.size());
  be().copy_on_device(b.get(), a.get(), x.size() * sizeof(float));
  require_same_bits(b.host(), x, {}, "copy_on_device");
  be().fill(b.get(), -2.5f, x.size());
  require_same_bits(b.host(), std::vector<float>(x.size(), -2.5f), {}, "fill");
  be().synchronize();

  be().reset_peak();
  const auto before = be().memory_stats();
  CHECK(before.peak_allocated == before.allocated);
  CHECK(before.device_total > 0);
  CHECK(before.device_used > 0);
  {
    Dev<float> big(std::size_t{16} << 20);  // 64 MiB
    const auto during = be().memory_stats();
    CHECK(during.allocated == before.allocated + (std::size_t{64} << 20));
    CHECK(during.peak_allocated >= during.allocated);
  }
  const auto after = be().memory_stats();
  CHECK(after.allocated == before.allocated);
  CHECK(after.peak_allocated == before.allocated + (std::size_t{64} << 20));
  be().reset_peak();
  CHECK(be().memory_stats().peak_allocated == after.allocated);

  // An absurd size: a qnum::Error naming the bytes asked and what is free; nothing recorded.
  try {
    (void)be().allocate(std::size_t{1} << 52);
    FAIL("allocating 4 PiB succeeded");
  } catch (const qnum::Error& e) {
    const std::string m = e.what();
    CHECK(m.find("4503599627370496 bytes") != std::string::npos);
    CHECK(m.find("free") != std::string::npos);
  }
  CHECK(be().memory_stats().allocated == after.allocated);
  // The backend still works after the failure.
  Dev<float> c(x);
  require_same_bits(c.host(), x, {}, "after OOM");
}

TEST_CASE("backend: gemm, every transpose, batched and strided, against a double reference") {
  std::mt19937 rng(7);
  struct Case {
    bool ta, tb;
    std::int64_t M, N, K, batch;
    float alpha, beta;
  };
  for (const Case c : {Case{false, false, 37, 33, 65, 1, 1.0f, 0.0f}, Case{false, true, 37, 33, 65, 3, 1.0f, 0.0f},
                       Case{true, false, 5, 129, 40, 2, 0.5f, 1.0f}, Case{true, true, 74, 768, 32, 2, 1.0f, -0.25f},
                       Case{false, true, 74, 128, 768, 1, 1.0f, 0.0f}, Case{false, false, 9, 7, 0, 2, 1.0f, 0.5f}}) {
    CAPTURE(c.ta);
    CAPTURE(c.tb);
    CAPTURE(c.M);
    CAPTURE(c.N);
    CAPTURE(c.K);
    CAPTURE(c.batch);
    // Padded leading dimensions and strides, so in-place head reads are exercised.
    const std::int64_t ar = c.ta ? c.K : c.M, ac = c.ta ? c.M : c.K, br = c.tb ? c.N : c.K, bc = c.tb ? c.K : c.N;
    const std::int64_t lda = ac + 3, ldb = bc + 1, ldc = c.N + 2;
    const std::int64_t sa = ar * lda + 5, sb = br * ldb + 7, sc = c.M * ldc + 1;
    const auto A = randn(static_cast<std::size_t>(sa * c.batch), 11);
    const auto B = randn(static_cast<std::size_t>(sb * c.batch), 12);
    const auto C0 = randn(static_cast<std::size_t>(sc * c.batch), 13);
    Dev<float> dA(A), dB(B), dC(C0);
    be().gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, dA.get(), lda, sa, dB.get(), ldb, sb, c.beta, dC.get(), ldc, sc,
              c.batch);
    const auto got = dC.host();
    int bad = 0;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < c.M; ++i)
        for (std::int64_t j = 0; j < c.N; ++j) {
          double s = 0, mag = 0;
          for (std::int64_t k = 0; k < c.K; ++k) {
            const double a = c.ta ? A[b * sa + k * lda + i] : A[b * sa + i * lda + k];
            const double w = c.tb ? B[b * sb + j * ldb + k] : B[b * sb + k * ldb + j];
            s += a * w;
            mag += std::fabs(a * w);
          }
          const std::size_t ci = static_cast<std::size_t>(b * sc + i * ldc + j);
          const double ref = c.alpha * s + (c.beta == 0.0f ? 0.0 : c.beta * C0[ci]);
          // float32 sums in any order: within K·2^-24·Σ|a·w| (+ the beta term's rounding)
          const double tol = (static_cast<double>(c.K) + 2) * 0x1p-24 * (std::fabs(c.alpha) * mag + std::fabs(c.beta * C0[ci])) + 1e-30;
          if (std::fabs(got[ci] - ref) > tol && bad++ < 5)
            FAIL_CHECK("C[" << b << "," << i << "," << j << "] gpu " << got[ci] << " ref " << ref << " tol " << tol);
        }
    CHECK(bad == 0);
    // Outside C's rows nothing was written (padding of ldc and the strides).
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < c.M; ++i)
        for (std::int64_t j = c.N; j < ldc && b * sc + i * ldc + j < sc * c.batch; ++j) {
          const std::size_t ci = static_cast<std::size_t>(b * sc + i * ldc + j);
          CHECK(bits(got[ci]) == bits(C0[ci]));
        }
  }
}

TEST_CASE("backend: binary, affine (bit for bit), unary and unary_backward against the CPU ops") {
  const std::size_t n = 37 * 29;
  const auto a = randn(n, 21), b0 = randn(37, 22), s1 = randn(1, 23);
  Dev<float> da(a), db(b0), ds(s1), out(n);
  using Op = DeviceBackend::Binary;
  for (const Op op : {Op::add, Op::sub, Op::mul, Op::div})
    for (const bool scalar : {false, true}) {
      const std::vector<float>& b = scalar ? s1 : b0;
      be().binary(op, da.get(), scalar ? ds.get() : db.get(), n, b.size(), out.get());
      std::vector<float> ref(n);
      for (std::size_t i = 0; i < n; ++i) {
        const float x = a[i], y = b[i % b.size()];
        ref[i] = op == Op::add ? x + y : op == Op::sub ? x - y : op == Op::mul ? x * y : x / y;
      }
      require_same_bits(out.host(), ref, a, "binary " + std::to_string(static_cast<int>(op)));
    }
  // In place (out aliases a).
  Dev<float> inplace(a);
  be().binary(Op::mul, inplace.get(), db.get(), n, 37, inplace.get());
  {
    std::vector<float> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = a[i] * b0[i % 37];
    require_same_bits(inplace.host(), ref, a, "binary in place");
  }
  be().affine(da.get(), 0.37f, -1.25f, out.get(), n);
  require_same_bits(out.host(), vec(qnum::add_scalar(qnum::mul_scalar(Tensor({static_cast<std::int64_t>(n)}, a), 0.37f), -1.25f)), a,
                    "affine = mul_scalar then add_scalar");

  using U = DeviceBackend::Unary;
  const auto g = randn(n, 24);
  for (const U f : {U::exp, U::log, U::relu, U::gelu, U::tanh, U::sigmoid}) {
    CAPTURE(static_cast<int>(f));
    std::vector<float> x = randn(n, 25, 3.0f);
    if (f == U::log)
      for (float& v : x) v = std::fabs(v) + 0.05f;
    Tensor tx({static_cast<std::int64_t>(n)}, x, true);
    Tensor ty = f == U::exp    ? qnum::exp(tx)
                : f == U::log  ? qnum::log(tx)
                : f == U::relu ? qnum::relu(tx)
                : f == U::gelu ? qnum::gelu(tx)
                : f == U::tanh ? qnum::tanh(tx)
                               : qnum::sigmoid(tx);
    ty.backward(Tensor({static_cast<std::int64_t>(n)}, g));
    Dev<float> dx(x), dy(n), dg(g), dgx(n);
    be().unary(f, dx.get(), dy.get(), n);
    // Transcendentals: the device rounds a double result once, the CPU's float functions are
    // within 1 ulp (gelu within ~3 ulp): 4 ulp relative.
    require_close(dy.host(), vec(ty), 5e-7, 1e-7, "unary forward");
    be().unary_backward(f, dg.get(), dx.get(), dy.get(), dgx.get(), n);
    // The derivative from the device's y (or x); 1 - y² and y(1 - y) cancel: 1e-6 of the largest.
    require_close(dgx.host(), grad(tx), 2e-6, 1e-6, "unary backward");
  }
}

TEST_CASE("backend: reduce_sum over [outer, n, inner] and permute against the CPU ops") {
  struct Case {
    std::int64_t outer, n, inner;
  };
  for (const Case c : {Case{1, 1000, 1}, Case{3, 37, 1}, Case{1, 74, 768}, Case{5, 37, 3}, Case{2, 4099, 33},
                       Case{1, 1, 128}}) {
    CAPTURE(c.outer);
    CAPTURE(c.n);
    CAPTURE(c.inner);
    const auto x = randn(static_cast<std::size_t>(c.outer * c.n * c.inner), 31);
    Dev<float> dx(x), out(static_cast<std::size_t>(c.outer * c.inner));
    const Tensor t({c.outer, c.n, c.inner}, x);
    be().reduce_sum(dx.get(), c.outer, c.n, c.inner, 1.0f, out.get());
    // Both sum in double and round once: equal but for double rounding in another order.
    require_close(out.host(), vec(qnum::sum(t, 1)), 1e-6, 1e-7, "reduce_sum");
    be().reduce_sum(dx.get(), c.outer, c.n, c.inner, 1.0f / static_cast<float>(c.n), out.get());
    require_close(out.host(), vec(qnum::mean(t, 1)), 1e-6, 1e-7, "reduce_sum as mean");
  }
  const std::vector<std::int64_t> shape{2, 37, 3, 5};
  const auto x = randn(2 * 37 * 3 * 5, 32);
  const Tensor t(shape, x);
  Dev<float> dx(x), dy(x.size());
  for (const std::vector<int>& perm : {std::vector<int>{0, 2, 1, 3}, {3, 2, 1, 0}, {1, 0, 3, 2}, {0, 1, 2, 3}}) {
    be().permute(dx.get(), shape.data(), perm.data(), 4, dy.get());
    require_same_bits(dy.host(), vec(qnum::permute(t, perm)), x, "permute rank 4");
  }
  const std::vector<std::int64_t> s3{37, 2, 32};
  const std::vector<int> p3{1, 0, 2};
  Dev<float> d3(std::vector<float>(x.begin(), x.begin() + 37 * 2 * 32)), y3(37 * 2 * 32);
  be().permute(d3.get(), s3.data(), p3.data(), 3, y3.get());
  const Tensor t3(s3, std::vector<float>(x.begin(), x.begin() + 37 * 2 * 32));
  require_same_bits(y3.host(), vec(qnum::permute(t3, p3)), {}, "permute rank 3");
}

TEST_CASE("backend: layer_norm and its backward against qnum::layer_norm's autograd") {
  for (const std::int64_t c : {std::int64_t{128}, std::int64_t{768}, std::int64_t{37}})
    for (const bool affine : {true, false})
      for (const float eps : {1e-5f, 1e-12f}) {
        CAPTURE(c);
        CAPTURE(affine);
        CAPTURE(eps);
        const std::int64_t rows = 2 * 37;
        const auto n = static_cast<std::size_t>(rows * c);
        auto xv = randn(n, 41, 2.0f);
        for (std::size_t i = 0; i < n; ++i) xv[i] += 0.5f;  // a mean away from zero
        const auto wv = randn(static_cast<std::size_t>(c), 42), bv = randn(static_cast<std::size_t>(c), 43);
        const auto gv = randn(n, 44);
        Tensor x({rows, c}, xv, true), w({c}, wv, true), b({c}, bv, true);
        Tensor y = affine ? qnum::layer_norm(x, w, b, eps) : qnum::layer_norm(x, Tensor(), Tensor(), eps);
        y.backward(Tensor({rows, c}, gv));
        Dev<float> dx(xv), dw(wv), db(bv), dy(n), dmean(static_cast<std::size_t>(rows)), drstd(static_cast<std::size_t>(rows));
        be().layer_norm(dx.get(), rows, c, affine ? dw.get() : nullptr, affine ? db.get() : nullptr, eps, dy.get(),
                        dmean.get(), drstd.get());
        // x̂ from the same double mean and rstd (sums in another order): 2 ulp of y, 1e-6 of max|y|.
        require_close(dy.host(), vec(y), 2.5e-7, 1e-6, "layer_norm y");
        // mean and rstd against a double reference of the same rows.
        const auto hm = dmean.host(), hr = drstd.host();
        for (std::int64_t r = 0; r < rows; ++r) {
          double m = 0, v = 0;
          for (std::int64_t k = 0; k < c; ++k) m += xv[static_cast<std::size_t>(r * c + k)];
          m /= static_cast<double>(c);
          for (std::int64_t k = 0; k < c; ++k) v += std::pow(xv[static_cast<std::size_t>(r * c + k)] - m, 2);
          v /= static_cast<double>(c);
          CHECK(hm[static_cast<std::size_t>(r)] == doctest::Approx(m).epsilon(1e-6));
          CHECK(hr[static_cast<std::size_t>(r)] == doctest::Approx(1.0 / std::sqrt(v + eps)).epsilon(1e-6));
        }
        Dev<float> dg(gv), dgx(n), dgw(static_cast<std::size_t>(c)), dgb(static_cast<std::size_t>(c));
        be().layer_norm_backward(dg.get(), dx.get(), dmean.get(), drstd.get(), affine ? dw.get() : nullptr, rows, c,
                                 dgx.get(), affine ? dgw.get() : nullptr, affine ? dgb.get() : nullptr);
        // The device's x̂ comes from float mean and rstd (the CPU keeps double): 1e-5 of max|gx|.
        require_close(dgx.host(), grad(x), 1e-5, 1e-5, "layer_norm gx");
        if (affine) {
          require_close(dgw.host(), grad(w), 1e-5, 1e-5, "layer_norm gw");
          require_close(dgb.host(), grad(b), 1e-6, 1e-7, "layer_norm gb");
        }
      }
}

TEST_CASE("backend: softmax, log_softmax and their backwards against the CPU ops") {
  for (const std::int64_t n : {std::int64_t{37}, std::int64_t{128}, std::int64_t{768}, std::int64_t{30522}})
    for (const bool log_space : {false, true}) {
      CAPTURE(n);
      CAPTURE(log_space);
      const std::int64_t rows = n > 1000 ? 5 : 74;
      const auto m = static_cast<std::size_t>(rows * n);
      const auto xv = randn(m, 51, 4.0f), gv = randn(m, 52);
      Tensor x({rows, n}, xv, true);
      Tensor y = log_space ? qnum::log_softmax(x, -1) : qnum::softmax(x, -1);
      y.backward(Tensor({rows, n}, gv));
      Dev<float> dx(xv), dy(m), dg(gv), dgx(m);
      be().softmax(dx.get(), rows, n, log_space, dy.get());
      // Both compute in double and round once: within an ulp or two.
      require_close(dy.host(), vec(y), 3e-7, 1e-7, "softmax y");
      be().softmax_backward(dg.get(), dy.get(), rows, n, log_space, dgx.get());
      require_close(dgx.host(), grad(x), 1e-6, 1e-6, "softmax gx");
    }
}

TEST_CASE("backend: cross_entropy and its backward against qnum::cross_entropy") {
  for (const std::int64_t c : {std::int64_t{2}, std::int64_t{37}, std::int64_t{768}, std::int64_t{30522}}) {
    CAPTURE(c);
    const std::int64_t rows = c > 1000 ? 9 : 74;
    const auto m = static_cast<std::size_t>(rows * c);
    const auto xv = randn(m, 61, 3.0f);
    std::vector<std::int64_t> t(static_cast<std::size_t>(rows));
    std::mt19937 rng(62);
    for (std::size_t i = 0; i < t.size(); ++i)
      t[i] = i % 5 == 3 ? -100 : static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(c));
    Tensor x({rows, c}, xv, true);
    Tensor loss = qnum::cross_entropy(x, t);
    loss.backward(Tensor::scalar(1.7f));
    Dev<float> dx(xv), dlogp(m), dloss(1), dg(std::vector<float>{1.7f}), dgx(m);
    Dev<std::int64_t> dt(t);
    be().cross_entropy(dx.get(), dt.get(), rows, c, -100, dlogp.get(), dloss.get());
    require_close(dlogp.host(), vec(qnum::log_softmax(Tensor({rows, c}, xv), -1)), 3e-7, 1e-7, "cross_entropy logp");
    require_close(dloss.host(), vec(loss), 1e-6, 0.0, "cross_entropy loss");
    be().cross_entropy_backward(dg.get(), dlogp.get(), dt.get(), rows, c, -100, dgx.get());
    require_close(dgx.host(), grad(x), 1e-6, 1e-7, "cross_entropy gx");
  }
  // Every row ignored: loss 0 (the interface's rule; the CPU op gives NaN) and zero gradients.
  const std::vector<std::int64_t> t(3, -100);
  const auto xv = randn(3 * 5, 63);
  Dev<float> dx(xv), dlogp(15), dloss(1), dg(std::vector<float>{1.0f}), dgx(15);
  Dev<std::int64_t> dt(t);
  be().cross_entropy(dx.get(), dt.get(), 3, 5, -100, dlogp.get(), dloss.get());
  CHECK(dloss.host()[0] == 0.0f);
  be().cross_entropy_backward(dg.get(), dlogp.get(), dt.get(), 3, 5, -100, dgx.get());
  require_same_bits(dgx.host(), std::vector<float>(15, 0.0f), {}, "all ignored: zero gradient");
}

TEST_CASE("backend: embedding (bit for bit) and embedding_backward (atomics) against qnum::embedding") {
  for (const std::int64_t c : {std::int64_t{32}, std::int64_t{768}}) {
    const std::int64_t V = 50, n = 2 * 37;
    const auto wv = randn(static_cast<std::size_t>(V * c), 71);
    std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
    std::mt19937 rng(72);
    for (auto& i : idx) i = static_cast<std::int64_t>(rng() % 20);  // many repeats
    const auto gv = randn(static_cast<std::size_t>(n * c), 73);
    Tensor w({V, c}, wv, true);
    Tensor y = qnum::embedding(idx, {2, 37}, w);
    y.backward(Tensor({2, 37, c}, gv));
    Dev<float> dw(wv), dy(static_cast<std::size_t>(n * c)), dg(gv), dgw(static_cast<std::size_t>(V * c));
    Dev<std::int64_t> di(idx);
    be().embedding(di.get(), n, dw.get(), c, dy.get());
    require_same_bits(dy.host(), vec(y), {}, "embedding");
    be().fill(dgw.get(), 0.0f, static_cast<std::size_t>(V * c));
    be().embedding_backward(di.get(), n, dg.get(), c, dgw.get());
    // float atomics add repeated rows in any order: within (repeats)·2^-24 of Σ|g|.
    require_close(dgw.host(), grad(w), 1e-5, 1e-6, "embedding gw");
  }
}

TEST_CASE("backend: dropout's mask and product are the CPU's bit for bit; mask_product") {
  for (const std::size_t n : {std::size_t{1037}, std::size_t{64}, std::size_t{1}, (std::size_t{1} << 20) + 5})
    for (const std::uint64_t first : {std::uint64_t{0}, std::uint64_t{77}, std::uint64_t{128}})
      for (const float p : {0.1f, 0.5f}) {
        CAPTURE(n);
        CAPTURE(first);
        CAPTURE(p);
        const auto x = randn(n, 81);
        const float scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
        std::vector<std::uint8_t> keep(n);
        std::vector<float> y(n);
        qnum::detail::dropout_mask_product(qnum::CounterRng(1234), first, p, scale, x.data(), keep.data(), y.data(), n);
        Dev<float> dx(x), dy(n);
        Dev<std::uint8_t> dk(n);
        be().dropout(dx.get(), n, p, scale, 1234, first, dk.get(), dy.get());
        require_equal(dk.host(), keep, "dropout mask");
        require_same_bits(dy.host(), y, x, "dropout y");
        if (first == 0 && n < 4096)  // the dropout op itself
          require_same_bits(dy.host(), vec(qnum::dropout(Tensor({static_cast<std::int64_t>(n)}, x), p, true, 1234)), x,
                            "qnum::dropout");
        std::vector<float> back(n);
        qnum::detail::mask_product(x.data(), keep.data(), scale, back.data(), n);
        be().mask_product(dx.get(), dk.get(), scale, dy.get(), n);
        require_same_bits(dy.host(), back, x, "mask_product");
      }
}

TEST_CASE("backend: attention and its backward against scaled_dot_product_attention (dropout mask bit for bit)") {
  struct Case {
    std::int64_t B, Tq, T, heads, D;
    float p;
    bool mask;
  };
  for (const Case c : {Case{2, 37, 37, 2, 32, 0.0f, true}, Case{2, 37, 37, 2, 32, 0.1f, true},
                       Case{2, 5, 37, 2, 16, 0.1f, false}, Case{1, 33, 33, 1, 8, 0.0f, false},
                       Case{2, 128, 128, 12, 64, 0.1f, true}}) {
    CAPTURE(c.B);
    CAPTURE(c.Tq);
    CAPTURE(c.T);
    CAPTURE(c.heads);
    CAPTURE(c.D);
    CAPTURE(c.p);
    const std::int64_t HD = c.heads * c.D;
    const auto nq = static_cast<std::size_t>(c.B * c.Tq * HD), nk = static_cast<std::size_t>(c.B * c.T * HD);
    const auto qv = randn(nq, 91), kv = randn(nk, 92), vv = randn(nk, 93), gv = randn(nq, 94);
    std::vector<float> mv(static_cast<std::size_t>(c.B * c.T), 0.0f);
    for (std::int64_t b = 0; b < c.B; ++b)  // batch row b: its last 3·b + 2 keys padded
      for (std::int64_t j = c.T - (3 * b + 2); j < c.T; ++j) mv[static_cast<std::size_t>(b * c.T + j)] = -10000.0f;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
    const std::uint64_t seed = 4242;
    Tensor q({c.B, c.Tq, HD}, qv, true), k({c.B, c.T, HD}, kv, true), v({c.B, c.T, HD}, vv, true);
    const Tensor mask = c.mask ? Tensor({c.B, 1, 1, c.T}, mv) : Tensor();
    Tensor out = qnum::scaled_dot_product_attention(q, k, v, mask, c.heads, scale, c.p, seed, qnum::AttentionMemory::save);
    out.backward(Tensor({c.B, c.Tq, HD}, gv));

    const auto scores = static_cast<std::size_t>(c.B * c.heads * c.Tq * c.T);
    Dev<float> dq(qv), dk(kv), dv(vv), dm(mv), dout(nq), dprobs(scores), dg(gv), dgq(nq), dgk(nk), dgv(nk);
    Dev<std::uint8_t> dkeep(scores);
    be().attention(dq.get(), dk.get(), dv.get(), c.mask ? dm.get() : nullptr, c.B, c.Tq, c.T, c.heads, c.D, scale, c.p,
                   seed, dprobs.get(), c.p > 0 ? dkeep.get() : nullptr, dout.get());
    if (c.p > 0) {  // the mask at the flat index of [B, heads, Tq, T], as the CPU draws it
      std::vector<std::uint8_t> keep(scores);
      const qnum::CounterRng rng(seed);
      for (std::size_t i = 0; i < scores; ++i) keep[i] = rng.uniform4(i) >= c.p;
      require_equal(dkeep.host(), keep, "attention dropout mask");
    }
    {  // the saved probabilities (before dropout) are softmax rows: each sums to 1
      const auto pr = dprobs.host();
      int bad = 0;
      for (std::size_t r = 0; r < scores / static_cast<std::size_t>(c.T); ++r) {
        double s = 0;
        for (std::int64_t j = 0; j < c.T; ++j) s += pr[r * static_cast<std::size_t>(c.T) + static_cast<std::size_t>(j)];
        if (std::fabs(s - 1.0) > 1e-5) ++bad;
      }
      CHECK(bad == 0);
    }
    // float32 GEMMs in cuBLAS's order and softmax sums in another order: 1e-4 relative, 1e-5
    // of the largest magnitude (the fused attention's 1e-4 bound).
    require_close(dout.host(), vec(out), 1e-4, 1e-5, "attention out");
    be().attention_backward(dg.get(), dq.get(), dk.get(), dv.get(), dprobs.get(), c.p > 0 ? dkeep.get() : nullptr, c.B,
                            c.Tq, c.T, c.heads, c.D, scale, c.p, dgq.get(), dgk.get(), dgv.get());
    require_close(dgq.host(), grad(q), 1e-4, 1e-5, "attention dq");
    require_close(dgk.host(), grad(k), 1e-4, 1e-5, "attention dk");
    require_close(dgv.host(), grad(v), 1e-4, 1e-5, "attention dv");
  }
}

TEST_CASE("backend: adam_step is nn::AdamW / nn::Adam's update bit for bit") {
  struct Case {
    bool decoupled;
    double wd;
  };
  for (const Case c : {Case{true, 0.01}, Case{false, 0.01}, Case{true, 0.0}, Case{false, 0.0}}) {
    CAPTURE(c.decoupled);
    CAPTURE(c.wd);
    const std::size_t n = 1037;
    const double lr = 3e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    Tensor p({static_cast<std::int64_t>(n)}, randn(n, 101), true);
    Dev<float> dp(p.to_vector()), dm(std::vector<float>(n, 0.0f)), dv(std::vector<float>(n, 0.0f));
    std::unique_ptr<qnum::nn::detail::AdamBase> opt;
    if (c.decoupled)
      opt = std::make_unique<qnum::nn::AdamW>(std::vector<Tensor>{p}, qnum::nn::AdamWOptions{lr, b1, b2, eps, c.wd});
    else
      opt = std::make_unique<qnum::nn::Adam>(std::vector<Tensor>{p}, qnum::nn::AdamOptions{lr, b1, b2, eps, c.wd});
    for (int t = 1; t <= 4; ++t) {
      const auto gv = randn(n, 110 + static_cast<std::uint64_t>(t), t == 3 ? 1e-3f : 1.0f);
      p.zero_grad();
      qnum::sum(qnum::mul(p, Tensor({static_cast<std::int64_t>(n)}, gv))).backward();
      REQUIRE(grad(p) == gv);
      opt->step();
      DeviceBackend::AdamStep s{};
      s.w1 = static_cast<float>(1.0 - b1);
      s.b2 = static_cast<float>(b2);
      s.w2 = static_cast<float>(1.0 - b2);
      s.l2_wd = static_cast<float>(c.decoupled ? 0.0 : c.wd);
      s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, t)));
      s.eps = static_cast<float>(eps);
      s.neg_step = static_cast<float>(-(lr / (1.0 - std::pow(b1, t))));
      s.keep = c.decoupled && c.wd != 0.0 ? static_cast<float>(1.0 - lr * c.wd) : 1.0f;
      Dev<float> dg(gv);
      be().adam_step(s, dp.get(), dg.get(), dm.get(), dv.get(), n);
      require_same_bits(dp.host(), p.to_vector(), gv, "adam p after step " + std::to_string(t));
    }
  }
}

TEST_CASE("backend: quantize dispatches every family's preset to its device kernel, bit for bit") {
  const std::vector<std::vector<std::int64_t>> shapes{{2, 37, 64}, {64, 96}, {4, 2, 32, 16}};
  int compared = 0, refused = 0;
  for (const auto& preset : qnum::format_presets())
    for (const qnum::Policy& pol : {qnum::exact, qnum::exact.with(qnum::Rounding::stochastic).with_seed(9), qnum::mase_compat})
      for (const auto& shape : shapes)
        for (const bool weight : {true, false}) {
          const qnum::Format f(preset.spec, pol);
          try {
            f.validate();
          } catch (const qnum::Error&) {
            continue;  // this preset does not exist under this policy
          }
          CAPTURE(std::string(preset.name));
          CAPTURE(f.to_string());
          CAPTURE(shape.size());
          CAPTURE(weight);
          const auto n = static_cast<std::size_t>(qnum::numel(shape));
          const auto x = randn(n, 121, 2.0f);
          std::vector<float> ref(static_cast<std::size_t>(qnum::numel(f.output_shape(shape))));
          bool cpu_ok = true;
          try {
            qnum::kernel::quantize(f, x, ref, shape, weight ? qnum::Role::weight : qnum::Role::activation);
          } catch (const qnum::Error&) {
            cpu_ok = false;  // e.g. tiles that do not divide this shape
          }
          Dev<float> dx(x), dy(n);
          if (!cpu_ok || ref.size() != n) {
            CHECK_THROWS_AS(be().quantize(f, dx.get(), shape.data(), static_cast<int>(shape.size()), weight, dy.get()),
                            qnum::Error);
            be().synchronize();
            ++refused;
            continue;
          }
          be().quantize(f, dx.get(), shape.data(), static_cast<int>(shape.size()), weight, dy.get());
          require_same_bits(dy.host(), ref, x, "quantize " + f.to_string());
          ++compared;
        }
  MESSAGE("quantize: " << compared << " (format, shape, role) cases compared, " << refused << " refused by both");
  CHECK(compared > 40);
}

TEST_CASE("backend: range_mask is the clipped STE's lo <= x <= hi") {
  auto x = randn(1037, 131, 2.0f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[6] = 1.5f;  // on the bound
  Dev<float> dx(x);
  Dev<std::uint8_t> dk(x.size());
  be().range_mask(dx.get(), x.size(), -1.0, 1.5, dk.get());
  std::vector<std::uint8_t> ref(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) ref[i] = x[i] >= -1.0 && x[i] <= 1.5;
  require_equal(dk.host(), ref, "range_mask");
}

TEST_CASE("backend: mxint8_pack is quantize_mxint8_mase_cuda; mxint8_linear against a double reference") {
  for (const auto& [M, N, K] : {std::array<std::int64_t, 3>{37, 96, 128}, std::array<std::int64_t, 3>{74, 768, 768}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    const auto wv = randn(static_cast<std::size_t>(N * K), 141, 0.05f);
    const auto xv = randn(static_cast<std::size_t>(M * K), 142);
    const auto bv = randn(static_cast<std::size_t>(N), 143);
    const auto packed = qnum::quantize_mxint8_mase_cuda(wv, 32);
    Dev<float> dw(wv), dx(xv), db(bv), dy(static_cast<std::size_t>(M * N));
    Dev<std::int8_t> dm(static_cast<std::size_t>(N * K));
    Dev<std::uint8_t> ds(static_cast<std::size_t>(N * K / 32));
    be().mxint8_pack(dw.get(), N, K, dm.get(), ds.get());
    require_equal(dm.host(), packed.mantissa, "mxint8 mantissas");
    require_equal(ds.host(), packed.scale, "mxint8 scales");
    const auto w16 = qnum::dequantize_mxint8_mase_cuda_bf16(packed);
    be().synchronize();
    const std::size_t held = be().memory_stats().allocated;
    for (const bool bias : {true, false}) {
      be().mxint8_linear(dx.get(), dm.get(), ds.get(), bias ? db.get() : nullptr, M, N, K, dy.get());
      const auto y = dy.host();
      int bad = 0;
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          double s = 0, mag = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            const double a = qnum::detail::mx_bf16_bits_to_float(
                qnum::detail::mx_float_to_bf16_bits(xv[static_cast<std::size_t>(i * K + k)]));
            const double w = qnum::detail::mx_bf16_bits_to_float(w16[static_cast<std::size_t>(j * K + k)]);
            s += a * w;
            mag += std::fabs(a * w);
          }
          const double bj = bias ? bv[static_cast<std::size_t>(j)] : 0.0;
          const double ref = s + bj;
          const double tol = static_cast<double>(K + 2) * 0x1p-24 * (mag + std::fabs(bj)) + 1e-30;
          if (std::fabs(y[static_cast<std::size_t>(i * N + j)] - ref) > tol && bad++ < 5)
            FAIL_CHECK("y[" << i << "," << j << "] gpu " << y[static_cast<std::size_t>(i * N + j)] << " ref " << ref);
        }
      CHECK(bad == 0);
    }
    be().synchronize();
    CHECK(be().memory_stats().allocated == held);  // the bf16 workspaces were transient
  }
}

TEST_CASE("backend: mxint8_embedding is the packed table's rows dequantized, bit for bit") {
  const std::int64_t V = 300, C = 128;
  const auto wv = randn(static_cast<std::size_t>(V * C), 151, 0.05f);
  const auto packed = qnum::quantize_mxint8_mase_cuda(wv, 32);
  const std::vector<std::int64_t> idx{0, 299, 7, 7, 150};
  Dev<std::int8_t> dm(packed.mantissa);
  Dev<std::uint8_t> ds(packed.scale);
  Dev<std::int64_t> di(idx);
  Dev<float> out(idx.size() * static_cast<std::size_t>(C));
  be().mxint8_embedding(di.get(), static_cast<std::int64_t>(idx.size()), dm.get(), ds.get(), C, out.get());
  std::vector<float> ref;
  for (const std::int64_t r : idx)
    for (std::int64_t k = 0; k < C; ++k) {
      const auto j = static_cast<std::size_t>(r * C + k);
      ref.push_back(qnum::detail::mx_bf16_bits_to_float(qnum::dequantize_mxint8_to_bf16_bits(packed.mantissa[j], packed.scale[j / 32])));
    }
  require_equal(out.host(), ref, "mxint8_embedding rows");
}

TEST_CASE("backend: the multi-tensor optimizer and clipping calls equal their one-tensor forms") {
  const std::vector<std::size_t> sizes{1, 300, 4097, 33};
  std::vector<std::vector<float>> pv, gv, mv, vv;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    pv.push_back(randn(sizes[i], 160 + i));
    gv.push_back(randn(sizes[i], 170 + i, 0.1f));
    mv.push_back(randn(sizes[i], 180 + i, 0.01f));
    auto v = randn(sizes[i], 190 + i, 0.01f);
    for (float& x : v) x = x * x;
    vv.push_back(v);
  }
  const qnum::DeviceBackend::AdamStep s{0.1f, 0.999f, 0.001f, 0.0f, 0.03f, 1e-8f, -0.01f, 0.9999f};
  std::vector<std::unique_ptr<Dev<float>>> p1, p2, g, m1, m2, v1, v2;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    p1.push_back(std::make_unique<Dev<float>>(pv[i])), p2.push_back(std::make_unique<Dev<float>>(pv[i]));
    g.push_back(std::make_unique<Dev<float>>(gv[i]));
    m1.push_back(std::make_unique<Dev<float>>(mv[i])), m2.push_back(std::make_unique<Dev<float>>(mv[i]));
    v1.push_back(std::make_unique<Dev<float>>(vv[i])), v2.push_back(std::make_unique<Dev<float>>(vv[i]));
    be().adam_step(s, p1[i]->get(), g[i]->get(), m1[i]->get(), v1[i]->get(), sizes[i]);
  }
  std::vector<float*> pp, mp, vp;
  std::vector<const float*> gp;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    pp.push_back(p2[i]->get()), gp.push_back(g[i]->get()), mp.push_back(m2[i]->get()), vp.push_back(v2[i]->get());
  be().adam_step_multi(s, pp.data(), gp.data(), mp.data(), vp.data(), sizes.data(), sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    require_equal(p2[i]->host(), p1[i]->host(), "adam_step_multi p");
    require_equal(m2[i]->host(), m1[i]->host(), "adam_step_multi m");
    require_equal(v2[i]->host(), v1[i]->host(), "adam_step_multi v");
  }
  // Σg² over the tensors, the norm and factor, the scaling.
  double want = 0;
  for (const auto& x : gv)
    for (float e : x) want += static_cast<double>(e) * e;
  Dev<float> sum(1), norm(1), factor(1);
  be().sum_squares_multi(gp.data(), sizes.data(), sizes.size(), sum.get());
  CHECK(sum.host()[0] == doctest::Approx(want).epsilon(1e-6));
  be().grad_norm_factor(sum.get(), 1.0f, norm.get(), factor.get());
  const double n = std::sqrt(static_cast<double>(sum.host()[0]));
  CHECK(norm.host()[0] == doctest::Approx(n).epsilon(1e-6));
  CHECK(factor.host()[0] == doctest::Approx(std::min(1.0, 1.0 / (n + 1e-6))).epsilon(1e-6));
  std::vector<float*> gw;
  for (auto& x : g) gw.push_back(x->get());
  be().scale_multi(gw.data(), sizes.data(), sizes.size(), factor.get());
  const float f = factor.host()[0];
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto want_g = gv[i];
    for (float& x : want_g) x = x * f;
    require_equal(g[i]->host(), want_g, "scale_multi");
  }
}
