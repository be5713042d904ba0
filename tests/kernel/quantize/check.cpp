// Definitions of tests/kernel/quantize/check.hpp, and the one instantiation of the kernels for
// this build's default architecture that the per-family test files call.
#define QNUM_KERNEL_CHECK_DEFINITIONS
#include "kernel/quantize/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include <type_traits>

// The kernels of every listed architecture, and of the default one where it is not listed
// (e.g. fma3<avx2>): its address, taken below, makes this file compile it.
#define QNUM_KERNEL_CHECK_DEFINE(A) QNUM_KERNEL_CHECK_ARCH(, A)
QNUM_KERNEL_CHECK_LISTED(QNUM_KERNEL_CHECK_DEFINE)

namespace kernel_check {
#define QNUM_KERNEL_CHECK_SAME(A) std::is_same_v<Arch, A> ||
template <class Arch>
constexpr bool kListed = QNUM_KERNEL_CHECK_LISTED(QNUM_KERNEL_CHECK_SAME) false;
template <class Arch, bool = kListed<Arch>>
struct DefaultArchKernels {
  static constexpr auto quantize = &qnum::kernel::quantize_arch<Arch>;
  static constexpr auto plan = &qnum::kernel::quantize_plan<Arch>;
};
template <class Arch>
struct DefaultArchKernels<Arch, true> {};
template struct DefaultArchKernels<xsimd::default_arch>;
}  // namespace kernel_check

namespace kernel_check {

using qnum::Format;
using qnum::Policy;

std::string hex(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", static_cast<double>(v), b);
  return buf;
}

/// Counts mismatches of `out` against `ref`; reports the first.
int count_mismatch(const Format& f, const std::vector<float>& in, const std::vector<float>& ref,
                   const std::vector<float>& out, const std::string& what) {
  int bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!same_bits(ref[i], out[i])) {
      if (bad == 0)
        MESSAGE(f.to_string(), " [", what, "] x=", hex(in[i]), " ref=", hex(ref[i]), " got=", hex(out[i]), " at ", i);
      ++bad;
    }
  return bad;
}

// ---- inputs -------------------------------------------------------------------------------

void add_with_neighbours(std::vector<float>& v, float x, int ulps) {
  float lo = x, hi = x;
  v.push_back(x);
  for (int i = 0; i < ulps; ++i) {
    lo = std::nextafter(lo, -qnum::detail::kInf);
    hi = std::nextafter(hi, qnum::detail::kInf);
    v.push_back(lo);
    v.push_back(hi);
  }
}

std::vector<float> random_inputs(std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v;
  for (int e = -150; e <= 127; e += 3)  // normal at many scales
    for (int i = 0; i < 24; ++i) v.push_back(std::ldexp(normal(gen), e));
  for (int i = 0; i < 2000; ++i) v.push_back(uni(gen));
  for (int i = 0; i < 500; ++i) v.push_back(uni(gen) * 3.0e38f);  // huge
  for (int i = 0; i < 500; ++i) v.push_back(uni(gen) * 1e-30f);   // tiny
  for (int i = 0; i < 500; ++i) {                                 // subnormal floats
    const std::uint32_t b = static_cast<std::uint32_t>(gen()) & 0x807fffffu;
    float x;
    std::memcpy(&x, &b, 4);
    v.push_back(x);
  }
  for (int i = 0; i < 2000; ++i) {  // random bit patterns (incl. NaN payloads)
    const auto b = static_cast<std::uint32_t>(gen());
    float x;
    std::memcpy(&x, &b, 4);
    v.push_back(x);
  }
  const float inf = qnum::detail::kInf;
  for (float s : {0.0f, -0.0f, inf, -inf, qnum::detail::kNaN, -qnum::detail::kNaN, 1e-8f, -1e-8f, 1e-9f, -1e-9f,
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min()})
    add_with_neighbours(v, s);
  return v;
}

/// Powers of two, sqrt(2) points and the mase log2 thresholds, each with float neighbours,
/// both signs (also shifted by MASE's epsilons, so value + eps lands on the threshold).
std::vector<float> log2_points() {
  std::vector<float> v;
  using qnum::kernel::detail::Log2Op;
  for (int e = -149; e <= 127; ++e) {
    add_with_neighbours(v, std::ldexp(1.0f, e), 3);
    add_with_neighbours(v, static_cast<float>(std::ldexp(1.4142135623730951, e)), 2);
  }
  for (auto op : {Log2Op::floor, Log2Op::ceil, Log2Op::nearest}) {
    const auto& t = qnum::kernel::detail::log2_thresholds(op);
    for (auto b : t.t) {
      if (b == INT32_MAX) continue;
      const float w = qnum::detail::bits_float(static_cast<std::uint32_t>(b));
      add_with_neighbours(v, w, 2);
      add_with_neighbours(v, w - 1e-9f, 2);
    }
  }
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

/// Every code's value of an elementwise format up to 16 bits, its float neighbours, and the
/// midpoints between consecutive values (ties) with theirs; both signs.
std::vector<float> code_neighbourhood(const Format& f) {
  std::vector<float> vals;
  std::visit(
      [&](const auto& s) {
        if constexpr (requires { qnum::decode(s, std::uint32_t{0}); } &&
                      !std::is_same_v<std::decay_t<decltype(s)>, qnum::BinarySpec> &&
                      !std::is_same_v<std::decay_t<decltype(s)>, qnum::TernarySpec>) {
          if (s.width > 16) return;
          for (std::uint32_t c = 0; c < (1u << s.width); ++c) {
            const float x = qnum::decode(s, c);
            if (std::isfinite(x)) vals.push_back(std::fabs(x));
          }
        }
      },
      f.spec);
  std::sort(vals.begin(), vals.end());
  vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
  std::vector<float> v;
  for (std::size_t i = 0; i < vals.size(); ++i) {
    add_with_neighbours(v, vals[i], 1);
    if (i + 1 < vals.size()) {
      const double mid = (static_cast<double>(vals[i]) + vals[i + 1]) / 2.0;
      add_with_neighbours(v, static_cast<float>(mid), 1);
      add_with_neighbours(v, static_cast<float>(std::sqrt(static_cast<double>(vals[i]) * vals[i + 1])), 1);
    }
  }
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

// ---- architectures --------------------------------------------------------------------------

template <class A>
int check_arch(const Format& f, const std::vector<float>& in, const std::vector<float>& ref) {
  std::vector<float> out(in.size(), 12345.0f);
  qnum::kernel::quantize_arch<A>(f, in, out, {static_cast<std::int64_t>(in.size())});
  return count_mismatch(f, in, ref, out, std::string(A::name()));
}

/// Every run-time dispatch level this CPU can run, on a tensor of `shape`.
int check_dispatch_levels(const Format& f, const std::vector<float>& in, const std::vector<float>& ref,
                          const qnum::Shape& shape, qnum::Role role) {
  namespace dispatch = qnum::kernel::dispatch;
  int bad = 0;
  for (dispatch::Isa isa : dispatch::compiled_isas()) {
    if (!dispatch::isa_supported(isa)) continue;
    std::vector<float> out(in.size(), 12345.0f);
    dispatch::quantize_isa(isa, f, in, out, shape, role);
    bad += count_mismatch(f, in, ref, out, std::string("dispatch:").append(dispatch::to_string(isa)));
  }
  return bad;
}

template <class... A>
int check_all_archs(Archs<A...>, const Format& f, const std::vector<float>& in, const std::vector<float>& ref) {
  return (check_arch<A>(f, in, ref) + ...) + check_dispatch_levels(f, in, ref, {static_cast<std::int64_t>(in.size())});
}

/// The whole conformance check of one format on one input set.
void check_format(const Format& f, std::vector<float> in) {
  CAPTURE(f.to_string());
  const std::vector<float> ref = f.quantize(in, {static_cast<std::int64_t>(in.size())});
  CHECK(check_all_archs(TestedArchs{}, f, in, ref) == 0);
}

void check_format_full(const Format& f, std::uint64_t seed) {
  auto in = random_inputs(seed);
  auto more = code_neighbourhood(f);
  in.insert(in.end(), more.begin(), more.end());
  if (f.policy.is_mase() || std::holds_alternative<qnum::LogSpec>(f.spec)) {
    auto lp = log2_points();
    in.insert(in.end(), lp.begin(), lp.end());
  }
  check_format(f, std::move(in));
}

Format fmt(const std::string& text, Policy base) { return Format::parse(text, base); }
/// `spec` with more keys appended (spec may or may not have keys already).
std::string with(const std::string& spec, const std::string& keys) {
  return spec + (spec.find(':') == std::string::npos ? ":" : ",") + keys;
}

/// Every code's neighbourhood of an MX element grid, laid out in blocks of `bs` whose first
/// element is the grid's max (so the shared scale is 2^s), for several scales s.
std::vector<float> mx_neighbourhood(const qnum::MXElement& e, int bs) {
  std::vector<float> vals;
  for (std::uint32_t c = 0; c < (1u << e.width); ++c) {
    const float v = qnum::decode(e, c);
    if (std::isfinite(v)) vals.push_back(v);
  }
  std::sort(vals.begin(), vals.end());
  std::vector<float> pts;
  for (std::size_t i = 0; i < vals.size(); ++i) {
    add_with_neighbours(pts, vals[i], 1);
    if (i + 1 < vals.size()) add_with_neighbours(pts, static_cast<float>((double(vals[i]) + vals[i + 1]) / 2), 1);
  }
  std::vector<float> out;
  for (int s : {-140, -127, -20, 0, 9, 100, 120}) {
    std::size_t j = 0;
    while (j < pts.size()) {
      out.push_back(static_cast<float>(e.max() * std::ldexp(1.0, s)));
      for (int k = 1; k < bs && j < pts.size(); ++k, ++j) out.push_back(std::ldexp(pts[j], s));
      while (out.size() % static_cast<std::size_t>(bs)) out.push_back(0.0f);
    }
  }
  return out;
}

void check_blocked(const Format& f, const std::vector<float>& in, std::int64_t cols, bool expect_simd) {
  CAPTURE(f.to_string());
  CAPTURE(cols);
  const std::int64_t rows = static_cast<std::int64_t>(in.size()) / cols;
  const std::vector<float> x(in.begin(), in.begin() + rows * cols);
  const qnum::Shape shape{rows, cols};
  CHECK((qnum::kernel::quantize_path(f, shape) == qnum::kernel::QuantizePath::simd) == expect_simd);
  const auto ref = f.quantize(x, shape);
  std::vector<float> out(x.size(), 123.0f);
  int bad = 0;
  auto run = [&]<class A>(A) {
    qnum::kernel::quantize_arch<A>(f, x, out, shape);
    bad += count_mismatch(f, x, ref, out, A::name());
  };
  [&]<class... A>(Archs<A...>) { (run(A{}), ...); }(TestedArchs{});
  bad += check_dispatch_levels(f, x, ref, shape);
  CHECK(bad == 0);
}

/// Every compiled architecture and dispatch level against the reference on one shaped tensor.
void check_shaped(const Format& f, const std::vector<float>& x, const qnum::Shape& shape, qnum::Role role,
                  bool expect_simd) {
  CAPTURE(f.to_string());
  CAPTURE(qnum::to_string(shape));
  CAPTURE(qnum::to_string(role));
  CHECK((qnum::kernel::quantize_path(f, shape, role) == qnum::kernel::QuantizePath::simd) == expect_simd);
  const auto ref = f.quantize(x, shape, role);
  std::vector<float> out(x.size(), 123.0f);
  int bad = 0;
  auto run = [&]<class A>(A) {
    qnum::kernel::quantize_arch<A>(f, x, out, shape, role);
    bad += count_mismatch(f, x, ref, out, A::name());
  };
  [&]<class... A>(Archs<A...>) { (run(A{}), ...); }(TestedArchs{});
  bad += check_dispatch_levels(f, x, ref, shape, role);
  CHECK(bad == 0);
}

/// quantize(f, x, x) (in place) against the reference out of place.
void check_in_place(const Format& f, const std::vector<float>& x, const qnum::Shape& shape, qnum::Role role) {
  CAPTURE(f.to_string());
  CAPTURE(qnum::to_string(shape));
  const auto ref = f.quantize(x, shape, role);
  std::vector<float> y = x;
  qnum::kernel::quantize(f, y, y, shape, role);
  CHECK(count_mismatch(f, x, ref, y, "in place") == 0);
}

/// Inputs for MASE's blocked formats: random values with specials, whole zero blocks (MASE's
/// zero-block rule), values at and below its 1e-8 pass-through, and exact ties of the element
/// grid 2^(e-M) (k + 1/2) for a spread of block scales.
std::vector<float> mase_block_inputs(std::size_t n, std::uint64_t seed, bool specials) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> pick(0, 99), kd(0, 127), ed(-20, 20);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int p = pick(gen);
    if (p < 60)
      x[i] = normal(gen);
    else if (p < 75)
      x[i] = std::ldexp(static_cast<float>(kd(gen)) + 0.5f, ed(gen) - 7);  // ties at many scales
    else if (p < 80)
      x[i] = (p % 2 ? 1.0f : -1.0f) * (p < 78 ? 1e-8f : 9.99e-9f);
    else if (p < 85)
      x[i] = -0.0f;
    else
      x[i] = normal(gen) * 1e-6f;
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 96); ++i) x[i] = 0.0f;  // zero blocks
  for (std::size_t i = 128; i < std::min<std::size_t>(n, 160); ++i)            // a subnormal block
    x[i] = std::ldexp(static_cast<float>(i % 7) - 3.0f, -140);
  if (specials && n > 500) {
    x[300] = std::numeric_limits<float>::infinity();
    x[420] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

/// Weight-scale inputs (N(0, 0.02), BERT's initialisation): block_log's biases then exceed 126,
/// so elements and results reach float's subnormals. With exact zeros (pruned weights), a
/// few subnormal elements inside ordinary blocks, and blocks of subnormals only.
std::vector<float> weight_scale_inputs(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_int_distribution<int> pick(0, 99), k(-40, 40), e(0, 30);
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int p = pick(gen);
    x[i] = p < 80   ? normal(gen)
           : p < 88 ? (p % 2 ? 0.0f : -0.0f)
           : p < 93 ? std::ldexp(float(k(gen)), -149 + e(gen))
                    : normal(gen) * 1e-30f;
  }
  for (std::size_t i = 64; i < std::min<std::size_t>(n, 96); ++i) x[i] = std::ldexp(float(k(gen)), -149 + e(gen) / 3);
  return x;
}

/// Every element code's value for several shared biases, with float neighbours, ties (the
/// midpoints and, for log, geometric midpoints), both signs, in blocks of `bs` whose first
/// element is that bias's largest value (so the block takes that bias).
std::vector<float> shared_bias_neighbourhood(const Format& f, int bs) {
  std::vector<float> out;
  auto emit = [&](const std::vector<float>& vals_in) {
    std::vector<float> vals;
    for (float v : vals_in)
      if (std::isfinite(v) && v >= 0) vals.push_back(v);
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    if (vals.empty()) return;
    std::vector<float> pts;
    for (std::size_t i = 0; i < vals.size(); ++i) {
      add_with_neighbours(pts, vals[i], 1);
      if (i + 1 < vals.size()) {
        add_with_neighbours(pts, static_cast<float>((double(vals[i]) + vals[i + 1]) / 2), 1);
        add_with_neighbours(pts, static_cast<float>(std::sqrt(double(vals[i]) * vals[i + 1])), 1);
      }
    }
    const std::size_t n = pts.size();
    for (std::size_t i = 0; i < n; ++i) pts.push_back(-pts[i]);
    std::size_t j = 0;
    while (j < pts.size()) {
      out.push_back(vals.back());
      for (int k = 1; k < bs && j < pts.size(); ++k, ++j) out.push_back(pts[j]);
      while (out.size() % static_cast<std::size_t>(bs)) out.push_back(0.0f);
    }
  };
  if (const auto* s = std::get_if<qnum::BlockMinifloatSpec>(&f.spec)) {
    for (int b : {-100, -3, 0, 7, 100, 127}) {
      std::vector<float> vals;
      for (std::uint32_t c = 0; c < (1u << (s->width - 1)); ++c)
        vals.push_back(qnum::detail::block_minifloat_decode_exact(*s, b, c));
      emit(vals);
    }
  }
  if (const auto* s = std::get_if<qnum::BlockLogSpec>(&f.spec)) {
    for (int b : {0, 3, 100, 127, s->bias_max()}) {
      std::vector<float> vals;
      for (std::uint32_t c = 0; c < (1u << (s->width - 1)); ++c)
        vals.push_back(qnum::detail::block_log_decode_exact(*s, b, c));
      emit(vals);
    }
  }
  return out;
}

/// Whether an exact block_minifloat/block_log spec runs in vector registers on a tensor of
/// rank r (every dim > 1): nearest rounding (block_log: either nearest) and block_size entries of 1 (or none) on every
/// leading dim (entries are right-aligned; extra leading ones are ignored).
bool expect_row_simd(const std::string& spec, std::size_t r) {
  if (spec.find("rounding=") != std::string::npos &&
      !(spec.starts_with("block_log") && spec.find("rounding=nearest_away") != std::string::npos))
    return false;
  const auto at = spec.find("block_size=");
  if (at == std::string::npos) return true;
  std::string v = spec.substr(at + 11);
  v = v.substr(0, v.find(','));
  std::vector<int> e;
  for (std::size_t p = 0; p <= v.size();) {
    const auto q = std::min(v.find('x', p), v.size());
    e.push_back(std::stoi(v.substr(p, q - p)));
    p = q + 1;
  }
  for (std::size_t d = 0; d + 1 < r; ++d) {  // entry for dim d, if any
    const std::ptrdiff_t k = static_cast<std::ptrdiff_t>(e.size()) - static_cast<std::ptrdiff_t>(r - d);
    if (k >= 0 && e[static_cast<std::size_t>(k)] != 1) return false;
  }
  return true;
}

/// A shaped check at 1, 2 and 3 threads on the default architecture.
void check_threads(const Format& f, const std::vector<float>& x, const qnum::Shape& shape, qnum::Role role) {
  CAPTURE(f.to_string());
  CAPTURE(qnum::to_string(shape));
  const auto ref = f.quantize(x, shape, role);
  for (int t : {1, 2, 3}) {
    qnum::set_num_threads(t);
    std::vector<float> out(x.size(), 123.0f);
    qnum::kernel::quantize(f, x, out, shape, role);
    CHECK(count_mismatch(f, x, ref, out, "threads") == 0);
  }
  qnum::set_num_threads(1);
}

}  // namespace kernel_check
