// SIMD quantize kernels against the scalar reference Format::quantize, bit for bit (any NaN
// equals any NaN), for every compiled-in instruction set, on random inputs, every code's
// neighbourhood (value, float neighbours, midpoints = ties), log2 decision points, specials,
// odd sizes, unaligned pointers and 1/2/3 threads; and every run-time dispatch level
// (qnum::kernels: baseline, avx2, avx512) this CPU runs, on the same inputs. Blocked and
// per-row families (block_minifloat, block_log, scale_integer, ternary, mase mxfp) also on
// every shared bias's code neighbourhood, MASE's tiles and roles, and in place.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qnum/kernel/dispatch.hpp"
#include "qnum/kernel/quantize.hpp"

namespace {

using qnum::Format;
using qnum::Policy;

/// Same bit pattern (any two NaNs count as equal), float or double.
template <class T>
bool same_bits(T a, T b) {
  if (a != a && b != b) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

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

void add_with_neighbours(std::vector<float>& v, float x, int ulps = 2) {
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

template <class... A>
struct Archs {};
using TestedArchs = Archs<
#if XSIMD_WITH_AVX512BW
    xsimd::avx512bw,
#endif
#if XSIMD_WITH_AVX2
    xsimd::avx2,
#endif
#if XSIMD_WITH_SSE4_2
    xsimd::sse4_2,
#endif
#if XSIMD_WITH_SSE2
    xsimd::sse2,
#endif
    xsimd::default_arch>;

template <class A>
int check_arch(const Format& f, const std::vector<float>& in, const std::vector<float>& ref) {
  std::vector<float> out(in.size(), 12345.0f);
  qnum::kernel::quantize_arch<A>(f, in, out, {static_cast<std::int64_t>(in.size())});
  return count_mismatch(f, in, ref, out, std::string(A::name()));
}

/// Every run-time dispatch level this CPU can run, on a tensor of `shape`.
int check_dispatch_levels(const Format& f, const std::vector<float>& in, const std::vector<float>& ref,
                          const qnum::Shape& shape, qnum::Role role = qnum::Role::weight) {
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

void check_format_full(const Format& f, std::uint64_t seed = 1) {
  auto in = random_inputs(seed);
  auto more = code_neighbourhood(f);
  in.insert(in.end(), more.begin(), more.end());
  if (f.policy.is_mase() || std::holds_alternative<qnum::LogSpec>(f.spec)) {
    auto lp = log2_points();
    in.insert(in.end(), lp.begin(), lp.end());
  }
  check_format(f, std::move(in));
}

Format fmt(const std::string& text, Policy base = qnum::exact) { return Format::parse(text, base); }
/// `spec` with more keys appended (spec may or may not have keys already).
std::string with(const std::string& spec, const std::string& keys) {
  return spec + (spec.find(':') == std::string::npos ? ":" : ",") + keys;
}

}  // namespace

TEST_CASE("kernel quantize: integer, exact and mase, all roundings") {
  for (const char* spec :
       {"integer:width=8,frac_width=4", "integer:width=8,frac_width=0,is_signed=false", "integer:width=4,frac_width=2",
        "integer:width=16,frac_width=8", "integer:width=32,frac_width=0", "integer:width=32,frac_width=16",
        "integer:width=26,frac_width=3", "integer:width=25,frac_width=-5", "integer:width=1,frac_width=0",
        "integer:width=8,frac_width=-3", "integer:width=12,frac_width=64", "integer:width=8,frac_width=-64",
        "integer:width=32,frac_width=40,is_signed=false"}) {
    for (const char* r : {"nearest_even", "nearest_away", "floor", "ceil", "toward_zero", "stochastic"}) {
      const Format f = fmt(with(spec, std::string("rounding=") + r + ",seed=7"));
      if (std::string(r) == "nearest_even") CHECK(qnum::kernel::quantize_path(f) == qnum::kernel::QuantizePath::simd);
      check_format_full(f);
    }
    check_format_full(fmt(with(spec, "overflow=wrap")));
    check_format_full(fmt(spec, qnum::mase_compat));
    check_format_full(fmt(with(spec, "rounding=floor"), qnum::mase_compat));
  }
}

TEST_CASE("kernel quantize: minifloat_ieee exact (OCP FP8 specials, overflow, flush) and mase") {
  for (const char* spec :
       {"minifloat_ieee", "fp8_e4m3", "fp8_e5m2", "minifloat_ieee:width=16,exponent_width=5",
        "minifloat_ieee:width=16,exponent_width=8,specials=ieee", "minifloat_ieee:width=6,exponent_width=3",
        "minifloat_ieee:width=4,exponent_width=2", "minifloat_ieee:width=12,exponent_width=4,exponent_bias=3",
        "minifloat_ieee:width=2,exponent_width=1", "minifloat_ieee:width=24,exponent_width=8,specials=ieee",
        "minifloat_ieee:width=32,exponent_width=8,specials=ieee",
        "minifloat_ieee:width=16,exponent_width=8,exponent_bias=128",
        "minifloat_ieee:width=8,exponent_width=4,exponent_bias=-5",
        "minifloat_ieee:width=16,exponent_width=5,exponent_bias=130",
        "minifloat_ieee:width=10,exponent_width=5,specials=fn"}) {
    const Format f = fmt(spec);
    check_format_full(f);
    check_format_full(fmt(with(spec, "subnormals=flush")));
    check_format_full(fmt(with(spec, "rounding=toward_zero")));
  }
  check_format_full(fmt("fp8_e5m2:overflow=infinity"));
  using qnum::kernel::QuantizePath;
  CHECK(qnum::kernel::quantize_path(fmt("fp8_e4m3")) == QuantizePath::simd);
  CHECK(qnum::kernel::quantize_path(fmt("minifloat_ieee", qnum::mase_compat)) == QuantizePath::simd);
  CHECK(qnum::kernel::quantize_path(fmt("minifloat_ieee:rounding=floor")) == QuantizePath::scalar);
  CHECK(qnum::kernel::quantize_path(fmt("minifloat_ieee:width=16,exponent_width=8,exponent_bias=128")) ==
        QuantizePath::scalar);
  for (const char* spec :
       {"minifloat_ieee", "minifloat_ieee:width=16,exponent_width=5", "minifloat_ieee:width=6,exponent_width=3",
        "minifloat_ieee:width=8,exponent_width=4,exponent_bias=3", "minifloat_ieee:width=16,exponent_width=7",
        "minifloat_ieee:width=4,exponent_width=3", "minifloat_ieee:width=24,exponent_width=7,exponent_bias=126",
        "minifloat_ieee:width=16,exponent_width=8,exponent_bias=128",
        "minifloat_ieee:width=8,exponent_width=4,exponent_bias=-8"}) {
    check_format_full(fmt(spec, qnum::mase_compat));
  }
}

TEST_CASE("kernel quantize: minifloat_denorm exact and mase") {
  for (const char* spec :
       {"minifloat_denorm", "minifloat_denorm:width=6,exponent_width=3", "minifloat_denorm:width=16,exponent_width=5",
        "minifloat_denorm:width=5,exponent_width=3,exponent_bias=2",
        "minifloat_denorm:width=16,exponent_width=8,exponent_bias=128", "minifloat_denorm:width=3,exponent_width=1"}) {
    check_format_full(fmt(spec));
    check_format_full(fmt(with(spec, "subnormals=flush")));
    check_format_full(fmt(with(spec, "rounding=ceil")));
    check_format_full(fmt(spec, qnum::mase_compat));
  }
  check_format_full(fmt("minifloat_denorm:width=4,exponent_width=3", qnum::mase_compat));  // M = 0
}

TEST_CASE("kernel quantize: log exact and mase") {
  for (const char* spec : {"log", "log:width=4", "log:width=6,exponent_bias=0", "log:width=8,exponent_bias=126",
                           "log:width=9,exponent_bias=140", "log:width=9,exponent_bias=128", "log:width=3",
                           "log:width=7,exponent_bias=-40"}) {
    check_format_full(fmt(spec));
    check_format_full(fmt(with(spec, "rounding=nearest_away")));
    check_format_full(fmt(with(spec, "rounding=stochastic,seed=3")));
    check_format_full(fmt(spec, qnum::mase_compat));
    // MASE's sign(x + c), c = 2^emin·0.1f: x = -c gives sign 0 and the value +0 (lanes of vectors)
    const Format m = fmt(spec, qnum::mase_compat);
    const float c = static_cast<float>(std::ldexp(1.0, std::get<qnum::LogSpec>(m.spec).emin()) * 0.1);
    std::vector<float> x;
    for (int i = 0; i < 64; ++i) x.push_back(i % 3 == 0 ? -c : (i % 3 == 1 ? std::nextafter(-c, 0.0f) : -2.0f * c));
    check_format(m, x);
  }
}

TEST_CASE("kernel quantize: binary, binarize, blocked and per-channel families at the kernel entry point") {
  for (const char* spec : {"binary", "binary:stochastic=true,seed=5", "binarize"}) {
    check_format_full(fmt(spec));
    // --mode mase takes MASE's bipolar=False when the key is left out (4-D tensors only), so
    // the bipolar kernels are named explicitly there.
    const std::string s = spec;
    check_format_full(fmt(s == "binarize" ? s : with(s, "bipolar=true"), qnum::mase_compat));
  }
  // blocked / per-channel families: the kernel entry point must equal the reference too
  std::vector<float> in = random_inputs(9);
  in.resize(64 * 32);
  for (const char* spec : {"block_fp", "mxint8", "mxfp4_e2m1", "mxfp8_e4m3", "block_log", "block_minifloat",
                           "binary:bipolar=false", "ternary", "scale_integer"}) {
    const Format f = fmt(spec);
    CAPTURE(spec);
    const qnum::Shape shape{64, 32};
    const auto ref = f.quantize(in, shape);
    std::vector<float> out(in.size());
    qnum::kernel::quantize(f, in, out, shape);
    CHECK(count_mismatch(f, in, ref, out, "reference") == 0);
  }
  const Format r = fmt("residual_sign");
  const auto ref = r.quantize(in, {64, 32});
  std::vector<float> out(ref.size());
  qnum::kernel::quantize(r, in, out, {64, 32});
  CHECK(count_mismatch(r, in, ref, out, "residual") == 0);
}

TEST_CASE("kernel quantize: thread counts 1, 2, 3 give identical bits") {
  std::mt19937_64 gen(42);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> in(300007);
  for (auto& x : in) x = normal(gen);
  for (const char* spec :
       {"integer:width=8,frac_width=4", "integer:width=8,frac_width=4,rounding=stochastic,seed=9", "fp8_e4m3",
        "minifloat_ieee:mode=mase_compat", "log", "log:mode=mase_compat", "binary", "minifloat_denorm:mode=mase_compat",
        "block_fp", "block_fp:block_size=7", "mxint8", "mxfp4_e2m1"}) {
    const Format f = fmt(spec);
    CAPTURE(spec);
    const auto ref = f.quantize(in, {static_cast<std::int64_t>(in.size())});
    for (int t : {1, 2, 3}) {
      qnum::set_num_threads(t);
      std::vector<float> out(in.size());
      qnum::kernel::quantize(f, in, out, {static_cast<std::int64_t>(in.size())});
      CHECK(count_mismatch(f, in, ref, out, "threads") == 0);
    }
  }
  for (const char* spec : {"block_fp:block_size=5", "mxint8", "mxfp8_e4m3"}) {  // many short rows
    const Format f = fmt(spec);
    CAPTURE(spec);
    const qnum::Shape shape{3001, 99};
    std::vector<float> x(in.begin(), in.begin() + 3001 * 99);
    const auto ref = f.quantize(x, shape);
    for (int t : {1, 2, 3}) {
      qnum::set_num_threads(t);
      std::vector<float> out(x.size());
      qnum::kernel::quantize(f, x, out, shape);
      CHECK(count_mismatch(f, x, ref, out, "threads") == 0);
    }
  }
  qnum::set_num_threads(1);
}

TEST_CASE("kernel quantize: sizes, unaligned pointers, in place, bad input") {
  const Format f = fmt("fp8_e4m3");
  std::vector<float> base = random_inputs(3);
  for (std::size_t n : {0u, 1u, 3u, 7u, 15u, 16u, 17u, 31u, 33u, 100u, 1023u}) {
    for (std::size_t off : {0u, 1u, 3u}) {
      std::span<const float> in(base.data() + off, n);
      std::vector<float> ref(n), outbuf(n + 1);
      f.quantize(in, ref, {static_cast<std::int64_t>(n)});
      std::span<float> out(outbuf.data() + (off ? 1 : 0), n);
      qnum::kernel::quantize(f, in, out, {static_cast<std::int64_t>(n)});
      int bad = 0;
      for (std::size_t i = 0; i < n; ++i) bad += !same_bits(ref[i], out[i]);
      CHECK(bad == 0);
    }
  }
  std::vector<float> x(base.begin(), base.begin() + 1000), ref(1000);
  f.quantize(x, ref, {1000});
  qnum::kernel::quantize(f, x, x, {1000});  // in place
  int bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) bad += !same_bits(ref[i], x[i]);
  CHECK(bad == 0);

  for (const char* spec : {"block_fp", "mxint8", "mxfp6_e3m2", "log:mode=mase_compat"}) {  // in place, blocked too
    const Format g = fmt(spec);
    CAPTURE(spec);
    std::vector<float> y(base.begin(), base.begin() + 370), yref(370);
    g.quantize(y, yref, {10, 37});
    qnum::kernel::quantize(g, y, y, {10, 37});
    int b2 = 0;
    for (std::size_t i = 0; i < y.size(); ++i) b2 += !same_bits(yref[i], y[i]);
    CHECK(b2 == 0);
  }

  std::vector<float> a(10), b(9);
  CHECK_THROWS_AS(qnum::kernel::quantize(f, a, b, {10}), qnum::Error);
  CHECK_THROWS_AS(qnum::kernel::quantize(f, a, a, {11}), qnum::Error);
  CHECK_THROWS_AS(qnum::kernel::quantize(fmt("mxint8"), a, b, {10}), qnum::Error);
  std::vector<float> empty;
  CHECK_NOTHROW(qnum::kernel::quantize(f, empty, empty, {0, 4}));
}

namespace {

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

}  // namespace

TEST_CASE("kernel quantize: block_fp and MX exact (OCP), blocks along the last axis") {
  std::vector<float> in = random_inputs(11);
  std::mt19937 gen(5);
  std::vector<float> shuffled = in;
  std::shuffle(shuffled.begin(), shuffled.end(), gen);
  std::vector<float> finite;
  for (float v : shuffled)
    if (std::isfinite(v)) finite.push_back(v);
  for (const char* spec : {"block_fp", "block_fp:block_size=32", "block_fp:width=4,exponent_width=3",
                           "block_fp:block_size=1x16", "block_fp:block_size=7", "block_fp:width=16,exponent_width=8",
                           "block_fp:width=8,exponent_width=5,block_size=-1", "mxint8", "mxint:width=4",
                           "mxint:block_size=5", "mxint:scale_bits=4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2",
                           "mxfp6_e2m3", "mxfp4_e2m1", "mxfp:exponent_width=2,frac_width=1,subnormals=flush"}) {
    const Format f = fmt(spec);
    for (std::int64_t cols : {32, 37, 100, 1})
      for (const auto* data : {&in, &shuffled, &finite}) check_blocked(f, *data, cols, true);
  }
  for (const char* spec : {"block_fp:block_size=4x8", "mxint:width=8,block_dim=0", "mxint:width=8,quantile_search=true",
                           "block_fp:rounding=stochastic", "mxint:width=8,quantile_search=true,mode=mase_compat"})
    check_blocked(fmt(spec), finite, 32, false);
  for (const char* spec :
       {"mxint8", "mxint:width=4", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1"}) {
    const Format f = fmt(spec);
    const auto e = std::visit(
        [](const auto& s) -> qnum::MXElement {
          if constexpr (requires { s.element(); })
            return s.element();
          else
            return {};
        },
        f.spec);
    check_blocked(f, mx_neighbourhood(e, 32), 32, true);
    check_blocked(f, mx_neighbourhood(e, 32), 64, true);
  }
}

TEST_CASE("kernel quantize: block_fp ties, carries and shared-exponent boundaries") {
  for (const char* spec : {"block_fp", "block_fp:width=4,exponent_width=3", "block_fp:width=16,exponent_width=8",
                           "block_fp:width=8,exponent_width=5,block_size=32"}) {
    const Format f = fmt(spec);
    const auto& s = std::get<qnum::BlockFPSpec>(f.spec);
    const int M = s.mantissa_bits();
    const int bs = s.block_size.back();
    std::vector<float> in;
    for (int lg : {-140, -120, -3, 0, 5, 100, 126}) {
      const double top = std::ldexp(2.0 - std::ldexp(1.0, -M), lg);  // rounds up to 2^(lg+1): the carry tie
      for (double anchor0 :
           {top, std::ldexp(1.0, lg), std::ldexp(1.5, lg), std::ldexp(2.0 - std::ldexp(1.0, -M - 1), lg)}) {
        std::vector<float> anchors;
        add_with_neighbours(anchors, static_cast<float>(anchor0), 1);
        for (float anchor : anchors) {
          std::vector<float> elems;
          const double half = std::ldexp(1.0, lg - M);  // half a step at e = lg + 1
          const std::int64_t steps = std::int64_t{1} << (M + 1);
          for (std::int64_t j = 0; j < steps; ++j)
            if (j < 64 || j > steps - 64) add_with_neighbours(elems, static_cast<float>(j * half), 1);
          for (std::size_t k = 0; k < elems.size();) {
            in.push_back(anchor);
            for (int t = 1; t < bs && k < elems.size(); ++t, ++k) in.push_back(k % 2 ? -elems[k] : elems[k]);
            while (in.size() % static_cast<std::size_t>(bs)) in.push_back(0.0f);
          }
        }
      }
    }
    check_blocked(f, in, bs, true);
    check_blocked(f, in, 4 * bs, true);
  }
}

TEST_CASE("kernel dispatch: levels, selection and names") {
  namespace dispatch = qnum::kernel::dispatch;
  const auto levels = dispatch::compiled_isas();
  REQUIRE(!levels.empty());
  CHECK(levels.front() == dispatch::Isa::baseline);
  CHECK(dispatch::isa_supported(dispatch::Isa::baseline));
  const dispatch::Isa chosen = dispatch::selected_isa();
  CHECK(dispatch::isa_supported(chosen));
  if (std::getenv("QNUM_MAX_ISA") == nullptr)  // the widest level this CPU runs
    for (dispatch::Isa isa : levels)
      if (dispatch::isa_supported(isa)) CHECK(isa <= chosen);
  for (dispatch::Isa isa : levels) {
    CHECK(dispatch::parse_isa(dispatch::to_string(isa)) == isa);
    if (dispatch::isa_supported(isa)) CHECK(!dispatch::simd_arch_name(isa).empty());
  }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  CHECK(levels.size() == 3);
  CHECK(dispatch::simd_arch_name(dispatch::Isa::baseline) == "sse2");
  if (dispatch::isa_supported(dispatch::Isa::avx2)) CHECK(dispatch::simd_arch_name(dispatch::Isa::avx2) == "fma3+avx2");
  if (dispatch::isa_supported(dispatch::Isa::avx512))
    CHECK(dispatch::simd_arch_name(dispatch::Isa::avx512) == "avx512bw");
#endif
  CHECK(dispatch::parse_isa("sse2") == dispatch::Isa::baseline);
  CHECK_THROWS_WITH_AS(dispatch::parse_isa("avx1024"), doctest::Contains("avx1024"), qnum::Error);
  // The dispatched entry point validates like kernel::quantize.
  const Format f = fmt("fp8_e4m3");
  std::vector<float> in(10, 1.0f), out(9);
  CHECK_THROWS_AS(dispatch::quantize(f, in, out, {10}), qnum::Error);
  out.resize(10);
  dispatch::quantize(f, in, out, {10});
  CHECK(out[3] == 1.0f);
  CHECK(dispatch::quantize_path(f) == qnum::kernel::QuantizePath::simd);
}

namespace {

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

}  // namespace

TEST_CASE("kernel quantize: mase block_fp and mxint in vector registers, every MASE tile") {
  using qnum::Role;
  for (const char* spec : {"block_fp", "block_fp:block_size=16", "block_fp:block_size=4x8", "block_fp:block_size=7",
                           "block_fp:width=4,exponent_width=3", "block_fp:width=16,exponent_width=8,block_size=1x16",
                           "block_fp:width=8,exponent_width=5,block_size=-1"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    for (bool specials : {false, true}) {
      check_shaped(f, mase_block_inputs(1000, 1, specials), {1000}, Role::weight, true);
      check_shaped(f, mase_block_inputs(37 * 50, 2, specials), {37, 50}, Role::weight, true);
      check_shaped(f, mase_block_inputs(37 * 50, 3, specials), {37, 50}, Role::activation, true);
      check_shaped(f, mase_block_inputs(3 * 20 * 33, 4, specials), {3, 20, 33}, Role::activation, true);
      check_in_place(f, mase_block_inputs(1000, 1, specials), {1000}, Role::weight);
      check_in_place(f, mase_block_inputs(37 * 50, 3, specials), {37, 50}, Role::activation);
    }
    // all-zero tensor (every block takes max 1) and MASE's errors through the reference
    check_shaped(f, std::vector<float>(64, 0.0f), {8, 8}, Role::weight, true);
    std::vector<float> out(1000);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, mase_block_inputs(1000, 5, false), out, {1000}, Role::activation),
                    qnum::Error);
  }
  for (const char* spec : {"mxint:width=8", "mxint:width=4", "mxint:width=8,block_size=5",
                           "mxint:width=8,block_size=16", "mxint:width=6,scale_bits=4", "mxint:width=8,block_dim=1"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    for (bool specials : {false, true}) {
      check_shaped(f, mase_block_inputs(64 * 80, 6, specials), {64, 80}, Role::weight, true);
      check_shaped(f, mase_block_inputs(2 * 5 * 80, 7, specials), {2, 5, 80}, Role::activation,
                   f.to_string().find("block_dim") == std::string::npos);
    }
    // the element count not divisible by the block size: MASE's assert, from the reference
    std::vector<float> out(33);
    CHECK(qnum::kernel::quantize_path(f, {33}) == qnum::kernel::QuantizePath::reference);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, mase_block_inputs(33, 8, false), out, {33}), qnum::Error);
  }
  check_shaped(fmt("mxint:width=8,quantile_search=true", qnum::mase_compat), mase_block_inputs(64 * 32, 9, false),
               {64, 32}, Role::weight, false);
}

namespace {

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

}  // namespace

TEST_CASE("kernel quantize: block_minifloat and block_log, exact and mase, threaded per block") {
  using qnum::Role;
  std::vector<float> rnd = random_inputs(21);
  for (const char* spec : {"block_minifloat",
                           "block_minifloat:block_size=7",
                           "block_minifloat:block_size=4x8",
                           "block_minifloat:width=6,exponent_width=3,exponent_bias_width=4",
                           "block_minifloat:block_size=2x3x5",
                           "block_minifloat:width=8,exponent_width=4,rounding=stochastic,seed=3",
                           "block_minifloat:rounding=toward_zero",
                           "block_minifloat:block_size=-1",
                           "block_minifloat:subnormals=flush",
                           "block_minifloat:width=3,exponent_width=1",
                           "block_minifloat:width=12,exponent_width=6,exponent_bias_width=2,block_size=32",
                           "block_log",
                           "block_log:block_size=5",
                           "block_log:block_size=3x16",
                           "block_log:width=4,exponent_bias_width=4",
                           "block_log:width=9,exponent_bias_width=8,block_size=1x32",
                           "block_log:width=9,exponent_bias_width=1",
                           "block_log:width=2,exponent_bias_width=3",
                           "block_log:rounding=nearest_away",
                           "block_log:rounding=stochastic,seed=4",
                           "block_log:rounding=floor",
                           "block_log:rounding=ceil"}) {
    const Format f = fmt(spec);
    // every code's neighbourhood for several biases, ties, specials: 1-D and 2-D
    std::vector<float> in = shared_bias_neighbourhood(f, 16);
    in.insert(in.end(), rnd.begin(), rnd.end());
    const std::int64_t cols = 48, rows = static_cast<std::int64_t>(in.size()) / cols;
    in.resize(static_cast<std::size_t>(rows * cols));
    check_shaped(f, in, {rows * cols}, Role::weight, expect_row_simd(spec, 1));
    check_shaped(f, in, {rows, cols}, Role::weight, expect_row_simd(spec, 2));
    const std::vector<float> in3(in.begin(), in.begin() + rows / 3 * 3 * cols);
    check_shaped(f, in3, {rows / 3, 3, cols}, Role::activation, expect_row_simd(spec, 3));
    CHECK(qnum::kernel::quantize_path(f, {rows, cols}) ==
          (expect_row_simd(spec, 2) ? qnum::kernel::QuantizePath::simd : qnum::kernel::QuantizePath::scalar));
    check_threads(f, in, {rows, cols}, Role::weight);
    check_threads(f, in, {rows * cols}, Role::weight);
    const auto w = weight_scale_inputs(64 * 48, 22);
    check_shaped(f, w, {64 * 48}, Role::weight, expect_row_simd(spec, 1));
    check_shaped(f, w, {64, 48}, Role::weight, expect_row_simd(spec, 2));
  }
  for (const char* spec :
       {"block_minifloat", "block_minifloat:block_size=16", "block_minifloat:block_size=4x8",
        "block_minifloat:block_size=7", "block_minifloat:width=6,exponent_width=3", "block_minifloat:block_size=-1",
        "block_log", "block_log:block_size=16", "block_log:block_size=4x8", "block_log:width=4,exponent_bias_width=4",
        "block_log:block_size=1x16", "block_log:width=9,exponent_bias_width=8",
        "block_log:width=3,exponent_bias_width=2", "block_minifloat:exponent_bias_width=4",
        "block_minifloat:width=12,exponent_width=6"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    for (bool specials : {false, true}) {
      check_shaped(f, mase_block_inputs(1000, 1, specials), {1000}, Role::weight, true);
      check_shaped(f, mase_block_inputs(37 * 50, 2, specials), {37, 50}, Role::weight, true);
      check_shaped(f, mase_block_inputs(37 * 50, 3, specials), {37, 50}, Role::activation, true);
      check_shaped(f, mase_block_inputs(3 * 20 * 33, 4, specials), {3, 20, 33}, Role::activation, true);
      check_threads(f, mase_block_inputs(301 * 77, 5, specials), {301, 77}, Role::weight);
      check_threads(f, mase_block_inputs(20 * 30 * 41, 6, specials), {20, 30, 41}, Role::activation);
      // in place: the zero-block rule's smallest max cannot be re-read from the input then
      check_in_place(f, mase_block_inputs(1000, 1, specials), {1000}, Role::weight);
      check_in_place(f, mase_block_inputs(37 * 50, 3, specials), {37, 50}, Role::activation);
    }
    const auto w = weight_scale_inputs(64 * 48, 23);
    check_shaped(f, w, {64 * 48}, Role::weight, true);
    check_shaped(f, w, {64, 48}, Role::weight, true);
    check_shaped(f, w, {8, 8, 48}, Role::activation, true);
    auto nb = shared_bias_neighbourhood(fmt(spec), 16);
    nb.resize(nb.size() / 16 * 16);
    check_shaped(f, nb, {static_cast<std::int64_t>(nb.size()) / 16, 16}, Role::weight, true);
    check_shaped(f, std::vector<float>(64, 0.0f), {8, 8}, Role::weight, true);  // every block max 1
    check_shaped(f, std::vector<float>(64, -0.0f), {64}, Role::weight, true);   // the same, one pass
    // log2 decision points, tiny blocks (biases above 126: the element function's tail)
    auto lp = log2_points();
    lp.resize(lp.size() / 16 * 16);
    check_shaped(f, lp, {static_cast<std::int64_t>(lp.size()) / 16, 16}, Role::weight, true);
    std::vector<float> tiny(32 * 16);
    for (std::size_t i = 0; i < tiny.size(); ++i)
      tiny[i] = std::ldexp(static_cast<float>(i % 13) - 6.0f, -150 + static_cast<int>(i % 40));
    check_shaped(f, tiny, {32, 16}, Role::weight, true);
    // MASE's errors (1-D activation, 3-D weight) come from the reference
    std::vector<float> out(60);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, mase_block_inputs(60, 5, false), out, {60}, Role::activation),
                    qnum::Error);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, mase_block_inputs(60, 5, false), out, {3, 4, 5}, Role::weight),
                    qnum::Error);
  }
  // in place, zero-sized, rank 0
  const Format f = fmt("block_log:block_size=4x4");
  std::vector<float> x = mase_block_inputs(24 * 10, 9, true);
  const auto ref = f.quantize(x, {24, 10});
  qnum::kernel::quantize(f, x, x, {24, 10});
  CHECK(count_mismatch(f, ref, ref, x, "in place") == 0);
  std::vector<float> none;
  qnum::kernel::quantize(f, none, none, {0, 4});
  std::vector<float> one{3.0f}, o1{0.0f};
  qnum::kernel::quantize(f, one, o1, {});
  CHECK(same_bits(o1[0], f.quantize(one, {})[0]));
}

TEST_CASE("kernel quantize: scale_integer and ternary, both bundles, threaded") {
  using qnum::Role;
  std::vector<float> rnd = random_inputs(31);
  // rows with ties of the integer grid: x * s = k + 1/2 (s = 2^(W-1) / max for exact rows of max
  // 2^(W-1)), whole zero rows, a NaN row and an Inf row
  auto rows_input = [&](std::int64_t cols) {
    std::vector<float> x = mase_block_inputs(static_cast<std::size_t>(40 * cols), 12, false);
    for (std::int64_t c = 0; c < cols; ++c) {
      x[static_cast<std::size_t>(2 * cols + c)] = c == 0 ? 128.0f : static_cast<float>(c % 256) - 127.5f;
      x[static_cast<std::size_t>(3 * cols + c)] = c == 0 ? 127.0f : static_cast<float>(c % 254) - 126.5f;
      x[static_cast<std::size_t>(4 * cols + c)] = c % 2 ? -0.0f : 0.0f;
      x[static_cast<std::size_t>(5 * cols + c)] = c == 3 ? qnum::detail::kNaN : 1.0f;
      x[static_cast<std::size_t>(6 * cols + c)] = c == 3 ? -qnum::detail::kInf : 1.0f;
    }
    x.insert(x.end(), rnd.begin(), rnd.begin() + (static_cast<std::int64_t>(rnd.size()) / cols) * cols);
    return x;
  };
  for (const char* spec : {"scale_integer", "scale_integer:width=4", "scale_integer:width=8,is_signed=false",
                           "scale_integer:width=16", "scale_integer:width=24"}) {
    for (Policy base : {qnum::exact, qnum::mase_compat}) {
      const Format f = fmt(spec, base);
      const bool simd = true;  // mase: float lanes; exact (nearest even): double lanes
      for (std::int64_t cols : {1, 7, 16, 33, 300}) {
        const auto x = rows_input(cols);
        check_shaped(f, x, {static_cast<std::int64_t>(x.size()) / cols, cols}, Role::weight, simd);
      }
      const auto x = rows_input(100);
      check_shaped(f, x, {static_cast<std::int64_t>(x.size())}, Role::weight, simd);  // one long row
      check_threads(f, x, {static_cast<std::int64_t>(x.size())}, Role::weight);
      std::vector<float> big(200003);
      std::mt19937_64 gen(5);
      std::normal_distribution<float> normal(0.0f, 3.0f);
      for (auto& v : big) v = normal(gen);
      check_threads(f, big, {200003}, Role::weight);
      check_threads(f, std::vector<float>(big.begin(), big.begin() + 7 * 28571), {7, 28571}, Role::weight);
    }
  }
  const auto x33 = rows_input(33);
  const qnum::Shape s33{static_cast<std::int64_t>(x33.size()) / 33, 33};
  check_shaped(fmt("scale_integer:rounding=stochastic,seed=2"), x33, s33, Role::weight, false);
  check_shaped(fmt("scale_integer:rounding=floor"), x33, s33, Role::weight, false);

  for (const char* spec :
       {"ternary", "ternary:scaling_factor=true", "ternary:threshold=0.3", "ternary:threshold=0.3,scaling_factor=true",
        "ternary:threshold=0", "ternary:threshold=1e-40"}) {
    const Format f = fmt(spec);
    std::vector<float> x = rows_input(64);
    // values at and next to the threshold 0.3 (a double that is no float)
    for (int i = 0; i < 64; ++i) add_with_neighbours(x, (i % 2 ? -1.0f : 1.0f) * 0.3f, 2);
    x.resize(x.size() / 64 * 64);
    const auto rows = static_cast<std::int64_t>(x.size()) / 64;
    check_shaped(f, x, {rows, 64}, Role::weight, true);
    check_shaped(f, x, {rows * 64}, Role::weight, true);
    check_shaped(f, x, {rows, 8, 8}, Role::weight, true);
    check_threads(f, x, {rows, 64}, Role::weight);
    std::vector<float> big(200003);
    std::mt19937_64 gen(6);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (auto& v : big) v = normal(gen);
    check_threads(f, big, {200003}, Role::weight);
    const Format m = fmt(spec, qnum::mase_compat);
    std::vector<float> x4 = mase_block_inputs(6 * 3 * 5 * 7, 13, true);
    check_shaped(m, x4, {6, 3, 5, 7}, Role::weight, false);
    check_threads(m, std::vector<float>(big.begin(), big.begin() + 7 * 3 * 89 * 100), {7, 3, 89, 100}, Role::weight);
    std::vector<float> out(60);
    CHECK_THROWS_AS(qnum::kernel::quantize(m, x4, out, {60}), qnum::Error);                      // size mismatch
    CHECK_THROWS_AS(qnum::kernel::quantize(m, std::vector<float>(60), out, {60}), qnum::Error);  // MASE: 4-D only
  }
}

TEST_CASE("kernel quantize: mase mxfp (MASE's codec and its quirks), threaded per block") {
  using qnum::Role;
  for (const char* spec :
       {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxfp:exponent_width=1,frac_width=2",
        "mxfp:exponent_width=4,frac_width=3,block_size=16", "mxfp:exponent_width=4,frac_width=3,block_dim=0",
        "mxfp:exponent_width=3,frac_width=2,block_size=4", "mxfp:exponent_width=2,frac_width=1,quantile_search=true",
        "mxfp:exponent_width=4,frac_width=3,quantile_search=true,block_dim=0"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    const auto& ms = std::get<qnum::MXFPSpec>(f.spec);
    const bool vec = !ms.quantile_search && ms.block_dim != 0;  // last-axis blocks: vector lanes
    for (bool specials : {false, true}) {
      check_shaped(f, mase_block_inputs(64 * 80, 14, specials), {64, 80}, Role::weight, vec);
      check_shaped(f, mase_block_inputs(2 * 8 * 64, 15, specials), {2, 8, 64}, Role::activation, vec);
    }
    auto nb = mx_neighbourhood(ms.element(), 32);
    nb.resize(nb.size() / 64 * 64);
    check_shaped(f, nb, {static_cast<std::int64_t>(nb.size()) / 64, 64}, Role::weight, vec);
    std::vector<float> big = mase_block_inputs(300 * 128, 16, true);
    check_threads(f, big, {300, 128}, Role::weight);
    // in place, against the reference in place (with quantile search and a permuted block
    // order the reference's error term reads inputs it already overwrote: kept identical)
    std::vector<float> x = mase_block_inputs(64 * 80, 17, true);
    std::vector<float> ref = x;
    f.quantize(ref, ref, {64, 80});
    qnum::kernel::quantize(f, x, x, {64, 80});
    CHECK(count_mismatch(f, ref, ref, x, "in place") == 0);
    // not divisible by the block size: MASE's assert
    std::vector<float> out(33);
    CHECK_THROWS_AS(qnum::kernel::quantize(f, std::vector<float>(33, 1.0f), out, {33}), qnum::Error);
  }
}

TEST_CASE("kernel quantize: mase mxfp vector lanes on a sweep of float32 bit patterns") {
  // Every 4099th bit pattern (both signs, every exponent field, zeros, subnormals, Inf and NaN)
  // in the order of their bits (blocks of neighbouring magnitudes: the block max's own carry,
  // the single subnormal binade) and shuffled (blocks spanning many binades: underflow).
  std::vector<float> x;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 4099)
    x.push_back(qnum::detail::bits_float(static_cast<std::uint32_t>(b)));
  x.resize(x.size() / 32 * 32);
  std::vector<float> shuffled = x;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  const auto n = static_cast<std::int64_t>(x.size());
  // finite values only, shuffled: a NaN or Inf sends its block to the reference, so these are
  // the blocks where x · 2^-shared underflows in the vector lanes (to -0 for negative x, which
  // MASE's sign test turns into +0)
  std::vector<float> finite;
  for (float v : shuffled)
    if (std::isfinite(v)) finite.push_back(v);
  finite.resize(finite.size() / 32 * 32);
  const auto nf = static_cast<std::int64_t>(finite.size());
  for (const char* spec :
       {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxfp:exponent_width=1,frac_width=2"}) {
    const Format f = fmt(spec, qnum::mase_compat);
    check_shaped(f, x, {n / 32, 32}, qnum::Role::weight, true);
    check_shaped(f, shuffled, {n}, qnum::Role::weight, true);
    check_shaped(f, finite, {nf}, qnum::Role::weight, true);
  }
}

TEST_CASE("kernel quantize: ternary channel statistics in vector lanes equal the reference's bits") {
  // delta and alpha are the reference's lane_sum-order double sums; every vector width must
  // give the same doubles (lengths around the 8-lane chunks, wide magnitudes, Inf and NaN).
  std::mt19937_64 gen(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-60, 60);
  for (const char* spec : {"ternary", "ternary:scaling_factor=true", "ternary:threshold=0.3,scaling_factor=true"}) {
    const auto s = std::get<qnum::TernarySpec>(fmt(spec).spec);
    for (std::int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4099}) {
      for (int variant = 0; variant < 3; ++variant) {
        std::vector<float> x(static_cast<std::size_t>(n));
        for (auto& v : x) v = std::ldexp(normal(gen), expo(gen));
        if (variant == 1 && n > 3) x[static_cast<std::size_t>(n / 2)] = std::numeric_limits<float>::infinity();
        if (variant == 2 && n > 3) x[static_cast<std::size_t>(n - 1)] = std::numeric_limits<float>::quiet_NaN();
        const auto ref = qnum::detail::ternary_channel_exact(s, x);
        auto run = [&]<class A>(A) {
          CAPTURE(A::name());
          CAPTURE(spec);
          CAPTURE(n);
          const auto got = qnum::kernel::detail::ternary_channel_simd<A>(s, x.data(), n);
          CHECK(same_bits(got.delta, ref.delta));
          CHECK(same_bits(got.alpha, ref.alpha));
          const double sum = qnum::kernel::detail::lane_sum_f32<A>(x.data(), n, [](auto v) { return v; });
          const double want = qnum::detail::lane_sum(
              n, [&](std::int64_t k) { return static_cast<double>(x[static_cast<std::size_t>(k)]); });
          CHECK(same_bits(sum, want));
        };
        [&]<class... A>(Archs<A...>) { (run(A{}), ...); }(TestedArchs{});
      }
    }
  }
}

TEST_CASE("kernel quantize: residual_sign in vector lanes, every level's output, both bundles") {
  std::mt19937_64 gen(31);
  std::normal_distribution<float> normal(0.0f, 0.7f);
  std::vector<float> x(4099);
  for (auto& v : x) v = normal(gen);
  // residuals that land exactly on zero (x = 0.75 with means 0.75x-0.2, x = 1 with one level),
  // signed zeros, subnormals, specials
  const float specials[] = {0.0f,
                            -0.0f,
                            0.75f,
                            -0.75f,
                            1.0f,
                            1e-40f,
                            -1e-40f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1e30f,
                            -3.0f};
  for (std::size_t i = 0; i < std::size(specials); ++i) x[i * 97] = specials[i];
  const auto n = static_cast<std::int64_t>(x.size());
  for (const char* spec : {"residual_sign:levels=1", "residual_sign", "residual_sign:levels=3",
                           "residual_sign:levels=5", "residual_sign:levels=2,means=0.75x-0.2"}) {
    for (const qnum::Policy& p : {qnum::exact, qnum::mase_compat}) {
      const Format f = fmt(spec, p);
      if (p.is_mase() && std::get<qnum::ResidualSignSpec>(f.spec).levels > 3) {
        std::vector<float> out(x.size() * 5);
        CHECK_THROWS_AS(qnum::kernel::quantize(f, x, out, {n}), qnum::Error);  // MASE: levels 1..3
        continue;
      }
      CAPTURE(f.to_string());
      CHECK(qnum::kernel::quantize_path(f, {n}) == qnum::kernel::QuantizePath::simd);
      const auto ref = f.quantize(x, {n});
      auto check = [&](const std::vector<float>& out, const char* what) {
        int bad = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) bad += same_bits(ref[i], out[i]) ? 0 : 1;
        CAPTURE(what);
        CHECK(bad == 0);
      };
      auto run = [&]<class A>(A) {
        std::vector<float> out(ref.size(), 123.0f);
        qnum::kernel::quantize_arch<A>(f, x, out, {n});
        check(out, A::name());
      };
      [&]<class... A>(Archs<A...>) { (run(A{}), ...); }(TestedArchs{});
      std::vector<float> big(300007 * 2);
      for (auto& v : big) v = normal(gen);
      big.resize(300007);
      const auto big_ref = f.quantize(big, {300007});
      for (int t : {1, 2, 3}) {
        qnum::set_num_threads(t);
        std::vector<float> out(big_ref.size());
        qnum::kernel::quantize(f, big, out, {300007});
        int bad = 0;
        for (std::size_t i = 0; i < big_ref.size(); ++i) bad += same_bits(big_ref[i], out[i]) ? 0 : 1;
        CHECK(bad == 0);
      }
      qnum::set_num_threads(1);
      std::vector<float> wrong(x.size());  // one level's worth of output for several levels
      if (std::get<qnum::ResidualSignSpec>(f.spec).levels > 1)
        CHECK_THROWS_AS(qnum::kernel::quantize(f, x, wrong, {n}), qnum::Error);
    }
  }
}

TEST_CASE("kernel quantize: nvfp4 in vector registers, every E4M3 scale and E2M1 midpoint") {
  const Format f = fmt("nvfp4");
  // A tensor max of 2688 = 6 · 448 gives the tensor scale t = 1, so a block whose max is 6 s
  // takes the block scale s exactly; its other elements sit on every E2M1 value and midpoint
  // times s and on their float neighbours, with both signs.
  std::vector<float> x;
  for (int code = 0; code < 0x7F; ++code) {
    qnum::NVFP4Block b;
    b.scale = static_cast<std::uint8_t>(code);
    const double s = b.scale_value();
    std::vector<float> points;
    for (double m : {0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0}) {
      const float v = static_cast<float>(m * s);
      points.insert(points.end(), {v, std::nextafter(v, 0.0f), std::nextafter(v, qnum::detail::kInf)});
    }
    for (std::size_t i = 0; i < points.size(); i += 15) {
      x.push_back(static_cast<float>(6.0 * s));
      for (std::size_t j = i; j < i + 15; ++j) x.push_back(j < points.size() ? (j % 2 ? -points[j] : points[j]) : 0.0f);
    }
  }
  x.push_back(2688.0f);
  x.resize((x.size() + 15) / 16 * 16, 0.0f);
  const auto n = static_cast<std::int64_t>(x.size());
  check_shaped(f, x, {n}, qnum::Role::weight, true);
  check_shaped(f, x, {n / 16, 16}, qnum::Role::weight, true);
  check_in_place(f, x, {n}, qnum::Role::weight);
  // random values, specials (NaN and Inf blocks), huge and tiny ones (blocks whose scale rounds
  // to 0), rows whose last block is short
  std::vector<float> r = random_inputs(21);
  r.resize(r.size() / 37 * 37);
  const auto m = static_cast<std::int64_t>(r.size());
  check_shaped(f, r, {m / 37, 37}, qnum::Role::weight, true);
  check_shaped(f, r, {m}, qnum::Role::weight, true);
  check_in_place(f, r, {m / 37, 37}, qnum::Role::activation);
  for (float& v : r)
    if (!std::isfinite(v)) v = 1.0f;
  check_shaped(f, r, {m / 37, 37}, qnum::Role::weight, true);
  check_shaped(f, {0.5f, -3.0f, 7.0f}, {3}, qnum::Role::weight, true);
  check_shaped(f, std::vector<float>(48, 0.0f), {3, 16}, qnum::Role::weight, true);
}
