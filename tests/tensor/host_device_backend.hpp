// A DeviceBackend on host memory, written as plain loops: it stands in for the CUDA backend
// so that device tensors (their dispatch, autograd nodes, Module::to, the optimizer's device
// step, BERT on a device) are tested on machines without a GPU. The kernels' own agreement
// with the CPU is proven on the GPU by cuda/tests; this checks the plumbing around them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "qnum/core/rng.hpp"
#include "qnum/format/format.hpp"
#include "qnum/format/mx_packed.hpp"
#include "qnum/kernel/quantize.hpp"
#include "qnum/tensor/device.hpp"

namespace qnum::testing {

class HostDeviceBackend final : public DeviceBackend {
 public:
  int device_count() noexcept override { return 1; }
  std::string name() override { return "host reference (test)"; }

  void* allocate(std::size_t bytes) override {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (p == nullptr) qnum::detail::fail("host reference: out of memory for ", bytes, " bytes");
    sizes_[p] = bytes;
    allocated_ += bytes;
    peak_ = std::max(peak_, allocated_);
    ++allocations;
    return p;
  }
  void deallocate(void* p) noexcept override {
    auto it = sizes_.find(p);
    if (it != sizes_.end()) allocated_ -= it->second, sizes_.erase(it);
    std::free(p);
  }
  void copy_to_device(void* d, const void* s, std::size_t n) override { ++uploads, std::memcpy(d, s, n); }
  void copy_to_host(void* d, const void* s, std::size_t n) override { ++downloads, std::memcpy(d, s, n); }
  void copy_on_device(void* d, const void* s, std::size_t n) override { std::memmove(d, s, n); }
  void fill(float* x, float v, std::size_t n) override { std::fill(x, x + n, v); }
  void synchronize() override {}
  MemoryStats memory_stats() override { return {allocated_, peak_, allocated_, std::size_t{1} << 34}; }
  void reset_peak() override { peak_ = allocated_; }

  void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
            std::int64_t lda, std::int64_t sa, const float* B, std::int64_t ldb, std::int64_t sb, float beta, float* C,
            std::int64_t ldc, std::int64_t sc, std::int64_t batch) override {
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            const float a = ta ? A[b * sa + k * lda + i] : A[b * sa + i * lda + k];
            const float w = tb ? B[b * sb + j * ldb + k] : B[b * sb + k * ldb + j];
            s += static_cast<double>(a) * w;
          }
          float& c = C[b * sc + i * ldc + j];
          c = static_cast<float>(alpha * s + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * c));
        }
  }
  void binary(Binary op, const float* a, const float* b, std::size_t n, std::size_t nb, float* out) override {
    for (std::size_t i = 0; i < n; ++i) {
      const float x = a[i], y = b[i % nb];
      out[i] = op == Binary::add ? x + y : op == Binary::sub ? x - y : op == Binary::mul ? x * y : x / y;
    }
  }
  void affine(const float* x, float scale, float shift, float* y, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
  }
  void unary(Unary f, const float* x, float* y, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) {
      const double v = x[i];
      double r = 0;
      switch (f) {
        case Unary::exp: r = std::exp(v); break;
        case Unary::log: r = std::log(v); break;
        case Unary::relu: r = v > 0 ? v : 0; break;
        case Unary::gelu: r = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); break;
        case Unary::tanh: r = std::tanh(v); break;
        case Unary::sigmoid: r = 1 / (1 + std::exp(-v)); break;
      }
      y[i] = static_cast<float>(r);
    }
  }
  void unary_backward(Unary f, const float* g, const float* x, const float* y, float* gx, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) {
      const double v = x[i], o = y[i];
      double d = 0;
      switch (f) {
        case Unary::exp: d = o; break;
        case Unary::log: d = 1 / v; break;
        case Unary::relu: d = v > 0 ? 1 : 0; break;
        case Unary::gelu:
          d = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * 3.14159265358979);
          break;
        case Unary::tanh: d = 1 - o * o; break;
        case Unary::sigmoid: d = o * (1 - o); break;
      }
      gx[i] = static_cast<float>(g[i] * d);
    }
  }
  void reduce_sum(const float* x, std::int64_t outer, std::int64_t n, std::int64_t inner, float scale,
                  float* out) override {
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        double s = 0;
        for (std::int64_t k = 0; k < n; ++k) s += x[(o * n + k) * inner + i];
        out[o * inner + i] = static_cast<float>(s * scale);
      }
  }
  void permute(const float* x, const std::int64_t* shape, const int* perm, int rank, float* y) override {
    std::int64_t in[4] = {1, 1, 1, 1}, stride[4] = {0, 0, 0, 0}, out[4] = {1, 1, 1, 1};
    for (int d = 0; d < rank; ++d) in[d] = shape[d];
    std::int64_t s = 1;
    for (int d = rank - 1; d >= 0; --d) stride[d] = s, s *= in[d];
    std::int64_t ostride[4] = {0, 0, 0, 0};
    for (int d = 0; d < rank; ++d) out[d] = in[perm[d]], ostride[d] = stride[perm[d]];
    std::int64_t i = 0;
    for (std::int64_t a = 0; a < out[0]; ++a)
      for (std::int64_t b = 0; b < out[1]; ++b)
        for (std::int64_t c = 0; c < out[2]; ++c)
          for (std::int64_t d = 0; d < out[3]; ++d)
            y[i++] = x[a * ostride[0] + b * ostride[1] + c * ostride[2] + d * ostride[3]];
  }
  void layer_norm(const float* x, std::int64_t rows, std::int64_t c, const float* w, const float* b, float eps,
                  float* y, float* mean, float* rstd) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * c;
      double m = 0, v = 0;
      for (std::int64_t k = 0; k < c; ++k) m += xr[k];
      m /= static_cast<double>(c);
      for (std::int64_t k = 0; k < c; ++k) v += (xr[k] - m) * (xr[k] - m);
      v /= static_cast<double>(c);
      const double rs = 1 / std::sqrt(v + eps);
      mean[r] = static_cast<float>(m), rstd[r] = static_cast<float>(rs);
      for (std::int64_t k = 0; k < c; ++k)
        y[r * c + k] = static_cast<float>((xr[k] - m) * rs * (w ? w[k] : 1.0f) + (b ? b[k] : 0.0f));
    }
  }
  void layer_norm_backward(const float* g, const float* x, const float* mean, const float* rstd, const float* w,
                           std::int64_t rows, std::int64_t c, float* gx, float* gw, float* gb) override {
    if (gw) std::fill(gw, gw + c, 0.0f);
    if (gb) std::fill(gb, gb + c, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r) {
      double s1 = 0, s2 = 0;
      for (std::int64_t k = 0; k < c; ++k) {
        const double xh = (x[r * c + k] - mean[r]) * static_cast<double>(rstd[r]);
        const double gh = g[r * c + k] * static_cast<double>(w ? w[k] : 1.0f);
        s1 += gh, s2 += gh * xh;
        if (gw) gw[k] += static_cast<float>(g[r * c + k] * xh);
        if (gb) gb[k] += g[r * c + k];
      }
      for (std::int64_t k = 0; k < c; ++k) {
        const double xh = (x[r * c + k] - mean[r]) * static_cast<double>(rstd[r]);
        const double gh = g[r * c + k] * static_cast<double>(w ? w[k] : 1.0f);
        gx[r * c + k] = static_cast<float>(rstd[r] * (gh - s1 / static_cast<double>(c) - xh * s2 / static_cast<double>(c)));
      }
    }
  }
  void softmax(const float* x, std::int64_t rows, std::int64_t n, bool log_space, float* y) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * n;
      double m = -INFINITY, s = 0;
      for (std::int64_t k = 0; k < n; ++k) m = std::max(m, static_cast<double>(xr[k]));
      for (std::int64_t k = 0; k < n; ++k) s += std::exp(xr[k] - m);
      for (std::int64_t k = 0; k < n; ++k)
        y[r * n + k] = static_cast<float>(log_space ? xr[k] - m - std::log(s) : std::exp(xr[k] - m) / s);
    }
  }
  void softmax_backward(const float* g, const float* y, std::int64_t rows, std::int64_t n, bool log_space,
                        float* gx) override {
    for (std::int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (std::int64_t k = 0; k < n; ++k) s += log_space ? g[r * n + k] : g[r * n + k] * static_cast<double>(y[r * n + k]);
      for (std::int64_t k = 0; k < n; ++k) {
        const double yk = y[r * n + k];
        gx[r * n + k] = static_cast<float>(log_space ? g[r * n + k] - std::exp(yk) * s : yk * (g[r * n + k] - s));
      }
    }
  }
  void cross_entropy(const float* logits, const std::int64_t* t, std::int64_t rows, std::int64_t c,
                     std::int64_t ignore, float* logp, float* loss) override {
    softmax(logits, rows, c, true, logp);
    double s = 0;
    std::int64_t used = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      if (t[r] != ignore) s -= logp[r * c + t[r]], ++used;
    loss[0] = used == 0 ? NAN : static_cast<float>(s / static_cast<double>(used));
  }
  void cross_entropy_backward(const float* g, const float* logp, const std::int64_t* t, std::int64_t rows,
                              std::int64_t c, std::int64_t ignore, float* gx) override {
    std::int64_t used = 0;
    for (std::int64_t r = 0; r < rows; ++r) used += t[r] != ignore;
    const double scale = used == 0 ? 0.0 : g[0] / static_cast<double>(used);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < c; ++k)
        gx[r * c + k] = t[r] == ignore ? 0.0f : static_cast<float>(scale * (std::exp(static_cast<double>(logp[r * c + k])) - (k == t[r])));
  }
  void embedding(const std::int64_t* idx, std::int64_t n, const float* w, std::int64_t c, float* out) override {
    for (std::int64_t i = 0; i < n; ++i) std::memcpy(out + i * c, w + idx[i] * c, static_cast<std::size_t>(c) * sizeof(float));
  }
  void embedding_backward(const std::int64_t* idx, std::int64_t n, const float* g, std::int64_t c, float* gw) override {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < c; ++k) gw[idx[i] * c + k] += g[i * c + k];
  }
  void dropout(const float* x, std::size_t n, float p, float scale, std::uint64_t seed, std::uint64_t first,
               std::uint8_t* keep, float* y) override {
    const CounterRng rng(seed);
    for (std::size_t i = 0; i < n; ++i) {
      keep[i] = rng.uniform4(first + i) >= p;
      y[i] = x[i] * (keep[i] ? scale : 0.0f);
    }
  }
  void mask_product(const float* x, const std::uint8_t* keep, float scale, float* y, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * (keep[i] ? scale : 0.0f);
  }
  void attention(const float* q, const float* k, const float* v, const float* mask, std::int64_t B, std::int64_t Tq,
                 std::int64_t T, std::int64_t H, std::int64_t D, float scale, float p, std::uint64_t seed,
                 float* probs, std::uint8_t* keep, float* out) override {
    const std::int64_t HD = H * D;
    const float ks = p > 0 ? static_cast<float>(1.0 / (1.0 - p)) : 1.0f;
    const CounterRng rng(seed);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < Tq; ++i) {
          float* pr = probs + ((b * H + h) * Tq + i) * T;
          std::vector<float> s(static_cast<std::size_t>(T));
          for (std::int64_t j = 0; j < T; ++j) {
            double d = 0;
            for (std::int64_t e = 0; e < D; ++e) d += q[(b * Tq + i) * HD + h * D + e] * static_cast<double>(k[(b * T + j) * HD + h * D + e]);
            s[static_cast<std::size_t>(j)] = static_cast<float>(d) * scale + (mask ? mask[b * T + j] : 0.0f);
          }
          softmax(s.data(), 1, T, false, pr);  // saved before dropout (the backward needs every entry)
          const std::uint64_t first = static_cast<std::uint64_t>(((b * H + h) * Tq + i) * T);
          for (std::int64_t j = 0; j < T; ++j)
            if (p > 0) keep[first + static_cast<std::uint64_t>(j)] = rng.uniform4(first + static_cast<std::uint64_t>(j)) >= p;
          for (std::int64_t e = 0; e < D; ++e) {
            double o = 0;
            for (std::int64_t j = 0; j < T; ++j) {
              const float pj = p > 0 ? pr[j] * (keep[first + static_cast<std::uint64_t>(j)] ? ks : 0.0f) : pr[j];
              o += pj * static_cast<double>(v[(b * T + j) * HD + h * D + e]);
            }
            out[(b * Tq + i) * HD + h * D + e] = static_cast<float>(o);
          }
        }
  }
  void attention_backward(const float* g, const float* q, const float* k, const float* v, const float* probs,
                          const std::uint8_t* keep, std::int64_t B, std::int64_t Tq, std::int64_t T, std::int64_t H,
                          std::int64_t D, float scale, float p, float* gq, float* gk, float* gv) override {
    const std::int64_t HD = H * D;
    const float ks = p > 0 ? static_cast<float>(1.0 / (1.0 - p)) : 1.0f;
    std::fill(gq, gq + B * Tq * HD, 0.0f);
    std::fill(gk, gk + B * T * HD, 0.0f);
    std::fill(gv, gv + B * T * HD, 0.0f);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < Tq; ++i) {
          const std::int64_t row = ((b * H + h) * Tq + i) * T;
          const float* pr = probs + row;  // before dropout
          std::vector<double> dp(static_cast<std::size_t>(T)), pre(static_cast<std::size_t>(T));
          for (std::int64_t j = 0; j < T; ++j) {
            const double f = p > 0 ? (keep[row + j] ? ks : 0.0) : 1.0;
            double d = 0;
            for (std::int64_t e = 0; e < D; ++e) {
              d += g[(b * Tq + i) * HD + h * D + e] * static_cast<double>(v[(b * T + j) * HD + h * D + e]);
              gv[(b * T + j) * HD + h * D + e] += static_cast<float>(pr[j] * f * g[(b * Tq + i) * HD + h * D + e]);
            }
            pre[static_cast<std::size_t>(j)] = pr[j];
            dp[static_cast<std::size_t>(j)] = d * f;
          }
          double dot = 0;
          for (std::int64_t j = 0; j < T; ++j) dot += dp[static_cast<std::size_t>(j)] * pre[static_cast<std::size_t>(j)];
          for (std::int64_t j = 0; j < T; ++j) {
            const double ds = pre[static_cast<std::size_t>(j)] * (dp[static_cast<std::size_t>(j)] - dot) * scale;
            for (std::int64_t e = 0; e < D; ++e) {
              gq[(b * Tq + i) * HD + h * D + e] += static_cast<float>(ds * k[(b * T + j) * HD + h * D + e]);
              gk[(b * T + j) * HD + h * D + e] += static_cast<float>(ds * q[(b * Tq + i) * HD + h * D + e]);
            }
          }
        }
  }
  void adam_step(const AdamStep& s, float* p, const float* g, float* m, float* v, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) {
      p[i] = p[i] * s.keep;
      v[i] = v[i] * s.b2;
      float gi = s.l2_wd != 0.0f ? std::fma(p[i], s.l2_wd, g[i]) : g[i];
      m[i] = std::fma(s.w1, gi - m[i], m[i]);
      v[i] = std::fma(s.w2 * gi, gi, v[i]);
      const float denom = std::sqrt(v[i]) / s.bc2_sqrt + s.eps;
      p[i] = std::fma(s.neg_step, m[i] / denom, p[i]);
    }
  }
  void mxint8_embedding(const std::int64_t* idx, std::int64_t n, const std::int8_t* m, const std::uint8_t* s,
                        std::int64_t c, float* out) override {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < c; ++k) {
        const std::int64_t j = idx[i] * c + k;
        out[i * c + k] = qnum::detail::mx_bf16_bits_to_float(dequantize_mxint8_to_bf16_bits(m[j], s[j / 32]));
      }
  }
  void quantize(const Format& f, const float* x, const std::int64_t* shape, int rank, bool weight_role,
                float* y) override {
    Shape sh(shape, shape + rank);
    const auto n = static_cast<std::size_t>(qnum::numel(sh));
    kernel::quantize(f, std::span<const float>(x, n), std::span<float>(y, n), sh,
                     weight_role ? Role::weight : Role::activation);
  }
  void range_mask(const float* x, std::size_t n, double lo, double hi, std::uint8_t* keep) override {
    for (std::size_t i = 0; i < n; ++i) keep[i] = x[i] >= lo && x[i] <= hi;
  }
  // mase-cuda MXINT8 (lab 4): the CPU reference per group of 32 along K; the linear as the
  // CUDA one computes it (bf16(x) times the bf16 dequantized W, fp32 sums, + bias).
  void mxint8_pack(const float* w, std::int64_t N, std::int64_t K, std::int8_t* mantissa,
                   std::uint8_t* scale) override {
    qnum::detail::require(K % 32 == 0, "host reference: mxint8_pack: K ", K, " is not a multiple of 32");
    for (std::int64_t g = 0; g < N * K / 32; ++g)
      scale[g] = quantize_mxint8_mase_cuda_group(w + g * 32, 32, mantissa + g * 32);
  }
  void mxint8_linear(const float* x, const std::int8_t* mantissa, const std::uint8_t* scale, const float* bias,
                     std::int64_t M, std::int64_t N, std::int64_t K, float* y) override {
    qnum::detail::require(K % 32 == 0, "host reference: mxint8_linear: K ", K, " is not a multiple of 32");
    std::vector<float> w(static_cast<std::size_t>(N * K)), xb(static_cast<std::size_t>(M * K));
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = detail::mx_bf16_bits_to_float(dequantize_mxint8_to_bf16_bits(mantissa[i], scale[i / 32]));
    for (std::size_t i = 0; i < xb.size(); ++i) xb[i] = detail::mx_bf16_bits_to_float(detail::mx_float_to_bf16_bits(x[i]));
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        float acc = 0.0f;
        for (std::int64_t k = 0; k < K; ++k) acc += xb[static_cast<std::size_t>(m * K + k)] * w[static_cast<std::size_t>(n * K + k)];
        y[m * N + n] = acc + (bias ? bias[n] : 0.0f);
      }
  }

  std::size_t allocations = 0, uploads = 0, downloads = 0;

 private:
  std::map<void*, std::size_t> sizes_;
  std::size_t allocated_ = 0, peak_ = 0;
};

/// Installs a HostDeviceBackend as the "cuda" backend for this test program's lifetime.
inline HostDeviceBackend& host_device_backend() {
  static HostDeviceBackend backend;
  register_cuda_backend(&backend);
  return backend;
}

}  // namespace qnum::testing
