// `qnum formats`, `qnum quantize` and `qnum demo`: the format families and presets, one
// format described, a float32 .npy tensor quantized by the CPU's widest kernels, and the error
// table of several formats on a generated tensor.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "qnum/core/error.hpp"
#include "qnum/format/format.hpp"
#include "qnum/io/npy.hpp"
#include "qnum/kernel/dispatch.hpp"

namespace qnum::cli {

/// `--mode` text: exact or mase (mase_compat).
inline Policy mode_policy(const std::string& mode) {
  if (mode == "exact") return exact;
  if (mode == "mase" || mode == "mase_compat") return mase_compat;
  qnum::detail::fail("unknown --mode '", mode, "' (allowed: exact, mase)");
}

namespace detail {

inline std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

inline void list_formats() {
  std::cout << "Format families (text form name:key=value,...; lists as 1x16; none for None)\n\n";
  for (const auto& fam : qnum::format_families()) {
    std::cout << fam.name << " - " << fam.help << "\n";
    for (const auto& k : fam.keys)
      std::printf("    %-20s default %-12s %s\n", k.key.c_str(), k.default_value.c_str(), k.help.c_str());
  }
  std::cout << "\nPresets\n";
  for (const auto& p : qnum::format_presets())
    std::printf("    %-12s %s\n", std::string(p.name).c_str(), std::string(p.help).c_str());
  std::cout << "\nPolicy keys (any family)\n";
  for (const auto& k : qnum::policy_key_docs())
    std::printf("    %-20s default %-12s %s\n", k.key.c_str(), k.default_value.c_str(), k.help.c_str());
}

inline void describe_format(const std::string& text, const qnum::Policy& base) {
  const auto f = qnum::Format::parse(text, base);
  const auto info = f.info();
  std::cout << "format           " << f.to_string() << "\n"
            << "family           " << f.family() << "\n"
            << "mode             " << qnum::to_string(f.policy.semantics) << "\n"
            << "bits per value   " << number(info.bits_per_value) << "\n"
            << "min positive     " << number(info.min_positive) << "\n"
            << "max              " << number(info.max) << "\n"
            << "distinct values  " << (info.distinct_values > 0 ? number(info.distinct_values) : "n/a") << "\n"
            << "value set        " << info.value_set << "\n";
}

}  // namespace detail

/// `qnum formats [--describe SPEC] [--mode exact|mase]`.
class FormatsCommand {
 public:
  explicit FormatsCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("formats", "List format families, keys and defaults, or describe one format");
    cmd_->add_option("--describe", describe_, "SPEC to describe (bits per value, min positive, max, distinct values)");
    cmd_->add_option("--mode", mode_, "exact or mase")->capture_default_str();
  }
  FormatsCommand(const FormatsCommand&) = delete;  // CLI11 holds pointers to the members
  FormatsCommand& operator=(const FormatsCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }
  void run() const {
    if (describe_.empty())
      detail::list_formats();
    else
      detail::describe_format(describe_, mode_policy(mode_));
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string describe_, mode_ = "exact";
};

/// `qnum quantize --format SPEC IN.npy OUT.npy`.
class QuantizeCommand {
 public:
  explicit QuantizeCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("quantize", "Quantize a float32 .npy tensor");
    cmd_->add_option("--format,-f", spec_, "format SPEC, name:key=value,...")->required();
    cmd_->add_option("--mode", mode_, "exact or mase (MASE's names, keys and float32 results)")->capture_default_str();
    cmd_->add_option("--role", role_, "weight, activation or bias (MASE: activation = skip_first_dim)")
        ->capture_default_str();
    seed_opt_ = cmd_->add_option("--seed", seed_, "seed for stochastic rounding");
    cmd_->add_option("--uniforms", uniforms_,
                     "stochastic binary: uniform draws (.npy, input's shape) to use instead of the seed");
    cmd_->add_option("IN", in_path_, "input .npy (float32, C order)")->required();
    cmd_->add_option("OUT", out_path_, "output .npy (written atomically)")->required();
  }
  QuantizeCommand(const QuantizeCommand&) = delete;
  QuantizeCommand& operator=(const QuantizeCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }
  void run() const {
    auto f = Format::parse(spec_, mode_policy(mode_));
    if (seed_opt_->count() > 0) f.policy.seed = seed_;
    const auto role = parse_role(role_);
    const auto in = read_npy(in_path_);
    const auto out_shape = f.output_shape(in.shape);
    std::vector<float> out;
    if (!uniforms_.empty()) {
      // Explicit draws replace the seeded generator (e.g. the torch.rand_like draws of a MASE case).
      const auto* binary = std::get_if<BinarySpec>(&f.spec);
      qnum::detail::require(binary && binary->stochastic, "--uniforms applies to binary:stochastic=true only, not ",
                            f.to_string());
      const auto u = read_npy(uniforms_);
      qnum::detail::require(u.shape == in.shape, "--uniforms shape ", to_string(u.shape),
                            " does not match the input shape ", to_string(in.shape));
      out.resize(in.data.size());
      quantize(*binary, f.policy, in.data, u.data, out, in.shape);
    } else {
      // The SIMD kernels of the CPU's widest instruction set: bit-identical to f.quantize.
      out.resize(static_cast<std::size_t>(numel(out_shape)));
      kernel::dispatch::quantize(f, in.data, out, in.shape, role);
    }
    write_npy(out_path_, out_shape, out);
  }

 private:
  CLI::App* cmd_ = nullptr;
  CLI::Option* seed_opt_ = nullptr;
  std::string spec_, mode_ = "exact", role_ = "weight", in_path_, out_path_, uniforms_;
  std::uint64_t seed_ = 0;
};

/// `qnum demo`: the quantization error table of several formats, exact and MASE's.
class DemoCommand {
 public:
  explicit DemoCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("demo", "Quantize a generated tensor in several formats; print the error table");
    cmd_->add_option("--size", size_, "number of values (multiple of 64)")->capture_default_str();
    cmd_->add_option("--seed", seed_, "generator seed")->capture_default_str();
  }
  DemoCommand(const DemoCommand&) = delete;
  DemoCommand& operator=(const DemoCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }
  void run() const {
    qnum::detail::require(size_ >= 64 && size_ % 64 == 0 && size_ <= (1LL << 28), "--size ", size_,
                          " must be a positive multiple of 64 up to 2^28");
    demo(size_, seed_);
  }

 private:
  static void demo(std::int64_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = normal(rng);
    for (std::size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;  // a few outliers, as in real activations
    const qnum::Shape shape{n / 64, 64};
    const std::vector<std::string> formats = {
        "integer:width=8,frac_width=4",
        "integer:width=4,frac_width=2",
        "minifloat_ieee:width=8,exponent_width=4",
        "fp8_e4m3",
        "fp8_e5m2",
        "minifloat_denorm:width=8,exponent_width=4",
        "log:width=8",
        "block_fp:width=8,block_size=1x16",
        "block_minifloat:width=8,exponent_width=4,exponent_bias_width=8,block_size=16",
        "block_log:width=8,exponent_bias_width=8,block_size=16",
        "mxint8",
        "mxfp8_e4m3",
        "mxfp6_e2m3",
        "mxfp4_e2m1",
        "ternary:scaling_factor=true",
        "binary:bipolar=false"};
    double signal = 0;
    for (float v : x) signal += double(v) * v;
    std::printf("Quantization error on %lld values, N(0,1) with 1%% x8 outliers, shape [%lld, 64] (seed %u)\n\n",
                static_cast<long long>(n), static_cast<long long>(shape[0]), seed);
    std::printf("%-58s %-6s %8s %12s %10s %10s\n", "format", "mode", "bits", "mse", "sqnr_db", "max_err");
    for (const auto& text : formats)
      for (const auto& mode : {qnum::exact, qnum::mase_compat}) {
        std::string mode_name = mode.is_mase() ? "mase" : "exact";
        try {
          const auto f = qnum::Format::parse(text, mode);
          const auto q = f.quantize(x, shape, qnum::Role::activation);
          double err = 0, max_err = 0;
          for (std::size_t i = 0; i < x.size(); ++i) {
            const double d = double(q[i]) - x[i];
            err += d * d;
            max_err = std::max(max_err, std::abs(d));
          }
          std::printf("%-58s %-6s %8.3f %12.4g %10.2f %10.4g\n", text.c_str(), mode_name.c_str(), f.bits_per_value(),
                      err / double(n), 10 * std::log10(signal / std::max(err, 1e-300)), max_err);
        } catch (const qnum::Error& e) {
          // e.g. OCP specials or rank-2 ternary: MASE has no such format (docs/formats.md). The
          // reason is printed, so an unexpected failure is not hidden behind "n/a".
          std::printf("%-58s %-6s %8s  (%s)\n", text.c_str(), mode_name.c_str(), "n/a", e.what());
        }
      }
  }

  CLI::App* cmd_ = nullptr;
  std::int64_t size_ = 1 << 16;
  std::uint32_t seed_ = 1;
};

}  // namespace qnum::cli
