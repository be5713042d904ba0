// Kernel quantize tests: the generic driver (kernel/quantize.hpp) and the run-time dispatch: every family at the entry
// point, thread counts, sizes, alignment, in place, bad input, dispatch levels, against the scalar reference bit for
// bit (tests/kernel/quantize/check.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernel/quantize/check.hpp"

using namespace kernel_check;

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

TEST_CASE("kernel quantize: streamed outputs (>= 8 MiB: non-temporal stores) at every output alignment") {
  // 4097 x 512 floats: just over kStreamMinBytes, rows of whole blocks plus a partial row run.
  const qnum::Shape shape{4097, 512};
  const std::size_t n = 4097 * 512;
  REQUIRE(n * sizeof(float) >= qnum::kernel::detail::kStreamMinBytes);
  const std::vector<float> in = mase_block_inputs(n, 11, true);
  std::vector<float> buf(n + 32);
  std::size_t aligned = 0;  // the first 64-byte-aligned float of buf
  while (reinterpret_cast<std::uintptr_t>(buf.data() + aligned) % 64 != 0) ++aligned;
  for (const char* spec : {"integer:width=8,frac_width=4", "fp8_e4m3", "log:mode=mase_compat", "block_fp",
                           "block_fp:mode=mase_compat", "block_minifloat", "block_log", "mxint8",
                           "mxint8:mode=mase_compat", "mxfp4_e2m1", "nvfp4", "scale_integer:mode=mase_compat"}) {
    const Format f = fmt(spec);
    for (qnum::Role role : {qnum::Role::weight, qnum::Role::activation}) {
      CAPTURE(spec);
      CAPTURE(static_cast<int>(role));
      const std::vector<float> ref = f.quantize(in, shape, role);
      for (std::size_t off : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{8}}) {
        CAPTURE(off);
        std::span<float> out(buf.data() + aligned + off, n);
        qnum::kernel::quantize(f, in, out, shape, role);
        CHECK(count_mismatch(f, in, ref, std::vector<float>(out.begin(), out.end()), "streamed") == 0);
      }
      CHECK(check_dispatch_levels(f, in, ref, shape, role) == 0);
    }
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
