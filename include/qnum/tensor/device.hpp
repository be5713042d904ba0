// Where a tensor's values live, and the kernels of an accelerator behind device tensors.
//
// The header-only library knows devices only through DeviceBackend, an interface of raw
// kernels on device pointers; qnum::cuda (cuda/, a compiled library) implements it and
// registers itself when its header qnum/cuda/backend.hpp is included, so code that never
// includes it stays free of CUDA. Tensor ops on device tensors (tensor/device_ops.hpp)
// call these kernels and record their own autograd nodes; the CPU path is untouched.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qnum/core/error.hpp"

namespace qnum {

class Format;

enum class DeviceType : std::uint8_t { cpu, cuda };

/// A device: "cpu", "cuda" (= "cuda:0") or "cuda:N".
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  friend constexpr bool operator==(const Device&, const Device&) = default;

  std::string str() const { return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index); }

  static Device parse(std::string_view text) {
    if (text == "cpu") return cpu();
    if (text == "cuda" || text == "gpu") return cuda(0);
    if (text.starts_with("cuda:") && text.size() > 5 && text.size() < 9) {
      int i = 0;
      for (char c : text.substr(5)) {
        if (c < '0' || c > '9') i = -1;
        if (i < 0) break;
        i = i * 10 + (c - '0');
      }
      if (i >= 0) return cuda(i);
    }
    detail::fail("device '", text, "' is not one of cpu, cuda, cuda:N");
  }
};

/// The kernels of one accelerator. Pointers are device pointers into float32 arrays unless
/// the name says otherwise; shapes are row-major. Calls are ordered on the backend's stream
/// (asynchronous, like CUDA's); copy_to_host and synchronize wait. Every method throws
/// qnum::Error on failure (out of memory names the size asked for and what is free).
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// Devices this backend sees (0 without a driver or GPU; never throws).
  virtual int device_count() noexcept = 0;
  /// The device in words ("NVIDIA H200, cuda:0"); first use initialises the device.
  virtual std::string name() = 0;

  // ---- memory -------------------------------------------------------------------------
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p) noexcept = 0;
  virtual void copy_to_device(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;  // waits
  virtual void copy_on_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill(float* x, float value, std::size_t n) = 0;
  /// dst[r·dst_stride + j] = src[r·src_stride + j] for r < rows, j < width (floats): a strided
  /// slice (narrow) and its scatter back. The default is one copy per row.
  virtual void copy_rows(float* dst, std::int64_t dst_stride, const float* src, std::int64_t src_stride,
                         std::int64_t rows, std::int64_t width) {
    for (std::int64_t r = 0; r < rows; ++r)
      copy_on_device(dst + r * dst_stride, src + r * src_stride, static_cast<std::size_t>(width) * sizeof(float));
  }
  virtual void synchronize() = 0;
  struct MemoryStats {
    std::size_t allocated = 0;       // bytes held by live allocations now
    std::size_t peak_allocated = 0;  // the most held at once since reset_peak()
    std::size_t device_used = 0;     // the whole device's used memory (context, other processes)
    std::size_t device_total = 0;
  };
  virtual MemoryStats memory_stats() = 0;
  virtual void reset_peak() = 0;

  // ---- dense algebra ------------------------------------------------------------------
  /// For b < batch: C_b[M,N] = alpha·op(A_b)·op(B_b) + beta·C_b, row-major; op(A) = Aᵀ when
  /// trans_a (A_b is then [K,M] with leading dimension lda); A_b = A + b·stride_a, etc.
  /// float32 (cuBLAS order; no TF32).
  virtual void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                    const float* A, std::int64_t lda, std::int64_t stride_a, const float* B, std::int64_t ldb,
                    std::int64_t stride_b, float beta, float* C, std::int64_t ldc, std::int64_t stride_c,
                    std::int64_t batch) = 0;

  // ---- elementwise --------------------------------------------------------------------
  enum class Binary : std::uint8_t { add, sub, mul, div };
  /// out[i] = a[i] ∘ b[i % nb] for i < n (nb divides n: b repeats as a suffix; nb == 1 a
  /// scalar). out may alias a.
  virtual void binary(Binary op, const float* a, const float* b, std::size_t n, std::size_t nb, float* out) = 0;
  /// y = x·scale + shift.
  virtual void affine(const float* x, float scale, float shift, float* y, std::size_t n) = 0;
  enum class Unary : std::uint8_t { exp, log, relu, gelu, tanh, sigmoid };
  /// y = f(x); gelu is the exact erf form 0.5·x·(1 + erf(x/√2)).
  virtual void unary(Unary f, const float* x, float* y, std::size_t n) = 0;
  /// gx = g·f'(x), given the input x and the forward's output y.
  virtual void unary_backward(Unary f, const float* g, const float* x, const float* y, float* gx, std::size_t n) = 0;
  /// out[o·inner + i] = scale · Σ_k x[(o·n + k)·inner + i] (o < outer, i < inner): sum over
  /// the middle of [outer, n, inner] (all: 1, n, 1; over rows of [rows, c]: 1, rows, c).
  virtual void reduce_sum(const float* x, std::int64_t outer, std::int64_t n, std::int64_t inner, float scale,
                          float* out) = 0;
  /// y = x with dimensions permuted (rank <= 4): y's dimension d is x's dimension perm[d].
  virtual void permute(const float* x, const std::int64_t* shape, const int* perm, int rank, float* y) = 0;

  // ---- neural-network ops (rows of the last dimension) ----------------------------------
  /// y[r] = (x[r] - mean)·rstd·w + b over c values (w, b may be null: 1, 0); saves mean and
  /// rstd (rows values each). Biased variance, as torch.
  virtual void layer_norm(const float* x, std::int64_t rows, std::int64_t c, const float* w, const float* b, float eps,
                          float* y, float* mean, float* rstd) = 0;
  /// gx (written); gw, gb (written, may be null) summed over rows.
  virtual void layer_norm_backward(const float* g, const float* x, const float* mean, const float* rstd,
                                   const float* w, std::int64_t rows, std::int64_t c, float* gx, float* gw,
                                   float* gb) = 0;
  /// y = softmax or log_softmax of each row of n values.
  virtual void softmax(const float* x, std::int64_t rows, std::int64_t n, bool log_space, float* y) = 0;
  virtual void softmax_backward(const float* g, const float* y, std::int64_t rows, std::int64_t n, bool log_space,
                                float* gx) = 0;
  /// loss[0] = mean over rows whose target != ignore_index of -log_softmax(logits)[r, t_r]
  /// (0 when none); logp (rows·c) saved for the backward; targets are device int64.
  virtual void cross_entropy(const float* logits, const std::int64_t* targets, std::int64_t rows, std::int64_t c,
                             std::int64_t ignore_index, float* logp, float* loss) = 0;
  /// gx = g[0]·(softmax - onehot)/count on counted rows, 0 on ignored rows (g is device).
  virtual void cross_entropy_backward(const float* g, const float* logp, const std::int64_t* targets,
                                      std::int64_t rows, std::int64_t c, std::int64_t ignore_index, float* gx) = 0;
  /// out[i, :] = weight[idx[i], :] (c values); indices device int64, checked by the caller.
  virtual void embedding(const std::int64_t* idx, std::int64_t n, const float* weight, std::int64_t c,
                         float* out) = 0;
  /// gw[idx[i], :] += g[i, :] (gw zeroed by the caller).
  virtual void embedding_backward(const std::int64_t* idx, std::int64_t n, const float* g, std::int64_t c,
                                  float* gw) = 0;
  /// Inverted dropout as the CPU's: element i kept (keep[i] = 1, y = x·scale) when
  /// CounterRng(seed).uniform4(first + i) >= p, else keep[i] = 0, y = 0·x.
  virtual void dropout(const float* x, std::size_t n, float p, float scale, std::uint64_t seed, std::uint64_t first,
                       std::uint8_t* keep, float* y) = 0;
  /// y[i] = x[i]·(keep[i] ? scale : 0) (dropout's backward; the STE mask with scale 1).
  virtual void mask_product(const float* x, const std::uint8_t* keep, float scale, float* y, std::size_t n) = 0;

  /// softmax(q·kᵀ·scale + mask)·v per (batch, head), dropout p on the probabilities (seed,
  /// mask drawn at flat indices of [B, heads, Tq, T] as the CPU's). q [B, Tq, heads·D], k, v
  /// [B, T, heads·D], mask null or additive [B, T]; out [B, Tq, heads·D]. probs (B·heads·Tq·T,
  /// the softmax probabilities before dropout, as the CPU op saves them: softmax's backward
  /// needs them also where dropout zeroed a probability) and keep (same count; null when
  /// p == 0) are saved for the backward, which applies keep to probs again.
  virtual void attention(const float* q, const float* k, const float* v, const float* mask, std::int64_t B,
                         std::int64_t Tq, std::int64_t T, std::int64_t heads, std::int64_t D, float scale, float p,
                         std::uint64_t seed, float* probs, std::uint8_t* keep, float* out) = 0;
  /// Gradients of attention for q, k, v (written), from the saved probs and keep.
  virtual void attention_backward(const float* g, const float* q, const float* k, const float* v,
                                  const float* probs, const std::uint8_t* keep, std::int64_t B, std::int64_t Tq,
                                  std::int64_t T, std::int64_t heads, std::int64_t D, float scale, float p,
                                  float* gq, float* gk, float* gv) = 0;

  // ---- optimizer and formats ----------------------------------------------------------
  /// One AdamW (decoupled) or Adam (L2) step, nn::AdamBase::update's arithmetic: p·(1-lr·wd)
  /// first when decoupled; v = v·β2; then m = fma(w1, g-m, m), v = fma(w2·g, g, v),
  /// p += neg_step·m / (sqrt(v)/bc2_sqrt + eps); with l2_wd != 0, g = fma(p, l2_wd, g) first.
  struct AdamStep {
    float w1, b2, w2, l2_wd, bc2_sqrt, eps, neg_step, keep;  // keep = 1 - lr·wd (1: no decay)
  };
  virtual void adam_step(const AdamStep& s, float* p, const float* g, float* m, float* v, std::size_t n) = 0;
  /// adam_step on `count` tensors at once (host arrays of device pointers; one launch on CUDA,
  /// as torch's fused/foreach optimizers). The default loops over adam_step.
  virtual void adam_step_multi(const AdamStep& s, float* const* p, const float* const* g, float* const* m,
                               float* const* v, const std::size_t* n, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) adam_step(s, p[i], g[i], m[i], v[i], n[i]);
  }
  /// out[0] = Σ over the `count` tensors of Σ x² (a global gradient norm's square), accumulated
  /// in double, in no fixed order on CUDA. The default: binary mul + reduce_sum per tensor.
  virtual void sum_squares_multi(const float* const* x, const std::size_t* n, std::size_t count, float* out) {
    std::vector<float> partial(count, 0.0f);
    for (std::size_t i = 0; i < count; ++i) {
      if (n[i] == 0) continue;
      float* sq = static_cast<float*>(allocate(n[i] * sizeof(float)));
      float* s = static_cast<float*>(allocate(sizeof(float)));
      binary(Binary::mul, x[i], x[i], n[i], n[i], sq);
      reduce_sum(sq, 1, static_cast<std::int64_t>(n[i]), 1, 1.0f, s);
      copy_to_host(&partial[i], s, sizeof(float));
      deallocate(sq), deallocate(s);
    }
    float total = 0.0f;
    double acc = 0.0;
    for (float v : partial) acc += v;
    total = static_cast<float>(acc);
    copy_to_device(out, &total, sizeof(float));
  }
  /// From sum_sq[0] = Σg²: norm[0] = √Σg² and factor[0] = max_norm / (norm + 1e-6) when that
  /// is below 1, else 1 (torch.nn.utils.clip_grad_norm_), on the device: no read back.
  virtual void grad_norm_factor(const float* sum_sq, float max_norm, float* norm, float* factor) {
    float s = 0.0f;
    copy_to_host(&s, sum_sq, sizeof(float));
    const double nv = std::sqrt(static_cast<double>(s)), f = static_cast<double>(max_norm) / (nv + 1e-6);
    const float out[2] = {static_cast<float>(nv), static_cast<float>(max_norm > 0 && f < 1.0 ? f : 1.0)};
    copy_to_device(norm, &out[0], sizeof(float));
    copy_to_device(factor, &out[1], sizeof(float));
  }
  /// x[i] *= factor[0] (a device scalar) for every tensor. The default: binary mul per tensor.
  virtual void scale_multi(float* const* x, const std::size_t* n, std::size_t count, const float* factor) {
    for (std::size_t i = 0; i < count; ++i)
      if (n[i] > 0) binary(Binary::mul, x[i], factor, n[i], 1, x[i]);
  }
  /// y = f.quantize(x) for a tensor of `shape` (rank <= 4) as kernel::quantize, bit for bit;
  /// families without a device kernel are a qnum::Error naming the family.
  virtual void quantize(const Format& f, const float* x, const std::int64_t* shape, int rank, bool weight_role,
                        float* y) = 0;
  /// keep[i] = lo <= x[i] <= hi (the clipped STE's mask).
  virtual void range_mask(const float* x, std::size_t n, double lo, double hi, std::uint8_t* keep) = 0;

  // ---- MXINT8-packed Linear (lab 4) ---------------------------------------------------
  /// Packs a [N, K] weight as mase-cuda MXINT8 (groups of 32 along K, K % 32 == 0): N·K
  /// int8 mantissas and N·K/32 scale bytes.
  virtual void mxint8_pack(const float* w, std::int64_t N, std::int64_t K, std::int8_t* mantissa,
                           std::uint8_t* scale) = 0;
  /// y[M, N] = x[M, K]·Wᵀ + bias (bias may be null) with W packed: W dequantized to bf16 into
  /// a transient workspace, x rounded to bf16, one bf16 GEMM with fp32 accumulation.
  virtual void mxint8_linear(const float* x, const std::int8_t* mantissa, const std::uint8_t* scale,
                             const float* bias, std::int64_t M, std::int64_t N, std::int64_t K, float* y) = 0;
  /// out[i, :] = row idx[i] of a [V, c] table packed as mase-cuda MXINT8 (groups of 32 along
  /// c, c % 32 == 0), dequantized: the bf16 values, exact in float32. Only the rows looked up
  /// are ever expanded (a packed embedding table).
  virtual void mxint8_embedding(const std::int64_t* idx, std::int64_t n, const std::int8_t* mantissa,
                                const std::uint8_t* scale, std::int64_t c, float* out) = 0;
};

namespace detail {
inline DeviceBackend*& cuda_backend_slot() {
  static DeviceBackend* backend = nullptr;
  return backend;
}
}  // namespace detail

/// Installs the backend of CUDA devices (qnum/cuda/backend.hpp does this when included).
inline bool register_cuda_backend(DeviceBackend* backend) {
  detail::cuda_backend_slot() = backend;
  return backend != nullptr;
}

/// The backend behind `d`; a clear error when this program was built without one.
inline DeviceBackend& device_backend(const Device& d) {
  if (d.is_cpu()) detail::fail("device_backend: cpu tensors use the host kernels, not a device backend");
  DeviceBackend* b = detail::cuda_backend_slot();
  if (b == nullptr)
    detail::fail("device ", d.str(),
                 ": this program was built without qnum's CUDA backend (build with nvcc present and link qnum::cuda)");
  if (d.index != 0) detail::fail("device ", d.str(), ": only cuda:0 is supported");
  return *b;
}

/// Whether `d` can be used here (cpu, or a CUDA backend is linked and sees the device).
inline bool device_available(const Device& d) {
  if (d.is_cpu()) return true;
  DeviceBackend* b = detail::cuda_backend_slot();
  return b != nullptr && d.index < b->device_count();
}

/// n floats (or bytes, via bytes()) of device memory, freed by its backend when the last
/// handle goes. Copies share the memory.
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const Device& device, std::size_t n) : device_(device), n_(n) {
    DeviceBackend* b = &device_backend(device);
    if (n > 0) p_ = std::shared_ptr<float>(static_cast<float*>(b->allocate(n * sizeof(float))), [b](float* p) {
                 b->deallocate(p);
               });
  }
  bool empty() const { return n_ == 0; }
  std::size_t size() const { return n_; }
  float* data() const { return p_.get(); }
  /// Handles sharing this memory (an autograd buffer adds into its gradient in place only
  /// when it holds the only one).
  long use_count() const { return p_.use_count(); }
  const Device& device() const { return device_; }
  DeviceBackend& backend() const { return device_backend(device_); }

 private:
  Device device_{};
  std::shared_ptr<float> p_;
  std::size_t n_ = 0;
};

/// Device memory for `count` values of a trivially copyable T (int64 indices, mask bytes).
template <class T>
class DeviceBytes {
 public:
  DeviceBytes() = default;
  DeviceBytes(const Device& device, std::size_t count) : n_(count) {
    DeviceBackend* b = &device_backend(device);
    if (count > 0) p_ = std::shared_ptr<T>(static_cast<T*>(b->allocate(count * sizeof(T))), [b](T* p) {
                     b->deallocate(p);
                   });
  }
  T* data() const { return p_.get(); }
  std::size_t size() const { return n_; }

 private:
  std::shared_ptr<T> p_;
  std::size_t n_ = 0;
};

}  // namespace qnum
