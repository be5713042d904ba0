// The `qnum` command line: list and describe formats, quantize .npy tensors, show the
// quantization error of several formats on a generated tensor, benchmark kernels, and train,
// test and predict with any registered model (train_command.hpp, test_command.hpp,
// predict_command.hpp; models/registry.hpp).
//
// Errors in user input (specs, files, options) print one line `qnum: error: ...` and exit 2.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <qnum/kernel/dispatch.hpp>
#include <qnum/qnum.hpp>
#if QNUM_WITH_CUDA
#include <qnum/cuda/backend.hpp>  // registers the CUDA backend: --device cuda
#endif

#include "bench_attention.hpp"
#include "bench_gemm.hpp"
#include "bench_quantize.hpp"
#include "bench_train.hpp"
#include "download_command.hpp"
#include "mase_flags.hpp"
#include "predict_command.hpp"
#include "search_command.hpp"
#include "test_command.hpp"
#include "train_command.hpp"
#include "transform_command.hpp"
#include "user_models.hpp"

namespace {

constexpr int kUsageError = 2;

qnum::Policy mode_policy(const std::string& mode) {
  if (mode == "exact") return qnum::exact;
  if (mode == "mase" || mode == "mase_compat") return qnum::mase_compat;
  qnum::detail::fail("unknown --mode '", mode, "' (allowed: exact, mase)");
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// ---- qnum formats -------------------------------------------------------------------------

void list_formats() {
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

void describe_format(const std::string& text, const qnum::Policy& base) {
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

// ---- qnum quantize ------------------------------------------------------------------------

void quantize_file(const std::string& spec, const qnum::Policy& base, const std::string& role_text, std::uint64_t seed,
                   bool seed_given, const std::string& uniforms_path, const std::string& in_path,
                   const std::string& out_path) {
  auto f = qnum::Format::parse(spec, base);
  if (seed_given) f.policy.seed = seed;
  const auto role = qnum::parse_role(role_text);
  const auto in = qnum::read_npy(in_path);
  const auto out_shape = f.output_shape(in.shape);
  std::vector<float> out;
  if (!uniforms_path.empty()) {
    // Explicit draws replace the seeded generator (e.g. the torch.rand_like draws of a MASE case).
    const auto* binary = std::get_if<qnum::BinarySpec>(&f.spec);
    qnum::detail::require(binary && binary->stochastic, "--uniforms applies to binary:stochastic=true only, not ",
                          f.to_string());
    const auto u = qnum::read_npy(uniforms_path);
    qnum::detail::require(u.shape == in.shape, "--uniforms shape ", qnum::to_string(u.shape),
                          " does not match the input shape ", qnum::to_string(in.shape));
    out.resize(in.data.size());
    qnum::quantize(*binary, f.policy, in.data, u.data, out, in.shape);
  } else {
    // The SIMD kernels of the CPU's widest instruction set: bit-identical to f.quantize.
    out.resize(static_cast<std::size_t>(qnum::numel(out_shape)));
    qnum::kernel::dispatch::quantize(f, in.data, out, in.shape, role);
  }
  qnum::write_npy(out_path, out_shape, out);
}

// ---- qnum demo ----------------------------------------------------------------------------

void demo(std::int64_t n, std::uint32_t seed) {
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
      } catch (const qnum::Error&) {
        // e.g. OCP specials or rank-2 ternary: MASE has no such format (docs/formats.md).
        std::printf("%-58s %-6s %8s\n", text.c_str(), mode_name.c_str(), "n/a");
      }
    }
}

// ---- qnum bench ---------------------------------------------------------------------------

/// Prints a benchmark result: the JSON line itself, or `key  value` lines for people.
void print_bench(const std::string& json, bool as_json) {
  if (as_json) {
    std::cout << json << "\n";
    return;
  }
  const auto j = nlohmann::json::parse(json);
  for (const auto& [key, value] : j.items()) {
    if (value.is_number_float())
      std::printf("%-14s %.4g\n", key.c_str(), value.get<double>());
    else
      std::printf("%-14s %s\n", key.c_str(),
                  value.is_string() ? value.get<std::string>().c_str() : value.dump().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qnum: custom number formats for deep learning"};
  app.require_subcommand(1);

  auto* formats = app.add_subcommand("formats", "List format families, keys and defaults, or describe one format");
  std::string describe, mode = "exact";
  formats->add_option("--describe", describe, "SPEC to describe (bits per value, min positive, max, distinct values)");
  formats->add_option("--mode", mode, "exact or mase")->capture_default_str();

  auto* quant = app.add_subcommand("quantize", "Quantize a float32 .npy tensor");
  std::string spec, role = "weight", in_path, out_path;
  std::uint64_t seed = 0;
  quant->add_option("--format,-f", spec, "format SPEC, name:key=value,...")->required();
  quant->add_option("--mode", mode, "exact or mase (MASE's names, keys and float32 results)")->capture_default_str();
  quant->add_option("--role", role, "weight, activation or bias (MASE: activation = skip_first_dim)")
      ->capture_default_str();
  auto* seed_opt = quant->add_option("--seed", seed, "seed for stochastic rounding");
  std::string uniforms;
  quant->add_option("--uniforms", uniforms,
                    "stochastic binary: uniform draws (.npy, input's shape) to use instead of the seed");
  quant->add_option("IN", in_path, "input .npy (float32, C order)")->required();
  quant->add_option("OUT", out_path, "output .npy (written atomically)")->required();

  auto* demo_cmd = app.add_subcommand("demo", "Quantize a generated tensor in several formats; print the error table");
  std::int64_t size = 1 << 16;
  std::uint32_t demo_seed = 1;
  demo_cmd->add_option("--size", size, "number of values (multiple of 64)")->capture_default_str();
  demo_cmd->add_option("--seed", demo_seed, "generator seed")->capture_default_str();

  auto* bench = app.add_subcommand("bench", "Measure kernels against their baseline in the same run");
  bench->require_subcommand(1);
  bool as_json = false;
  int bench_threads = 1;
  auto* bq = bench->add_subcommand("quantize", "quantize GB/s vs memcpy of the same buffer");
  std::string bq_spec, bq_mode = "exact";
  std::int64_t bq_size = 1 << 22;
  bq->add_option("--format,-f", bq_spec, "format SPEC")->required();
  bq->add_option("--mode", bq_mode, "exact or mase")->capture_default_str();
  bq->add_option("--size", bq_size, "number of floats")->capture_default_str();
  float bq_sigma = 2.0f;
  bq->add_option("--sigma", bq_sigma, "standard deviation of the normal test data (0.02: BERT's weight scale)")
      ->capture_default_str();
  auto* bg = bench->add_subcommand("gemm", "GEMM GFLOP/s vs fp32 GEMM of the same shape");
  std::int64_t gm = 1024, gn = 1024, gk = 1024;
  std::string gkind = "fp32";
  bg->add_option("--m", gm, "rows of A and C")->capture_default_str();
  bg->add_option("--n", gn, "columns of C")->capture_default_str();
  bg->add_option("--k", gk, "reduction length")->capture_default_str();
  bg->add_option("--kind", gkind, "fp32, int8, mxint8 or binary")->capture_default_str();
  auto* ba = bench->add_subcommand("attention", "fused (flash-style) vs naive attention forward");
  std::int64_t aseq = 512, aheads = 12, adim = 64;
  ba->add_option("--seq", aseq, "sequence length")->capture_default_str();
  ba->add_option("--heads", aheads, "attention heads")->capture_default_str();
  ba->add_option("--head-dim", adim, "head dimension")->capture_default_str();
  auto* bt = bench->add_subcommand("train", "one training epoch of a JSC model on jsc-synthetic (Adam)");
  std::string bt_model = "jsc-tiny";
  std::int64_t bt_rows = 600000, bt_batch = 256;
  bt->add_option("--model", bt_model, "JSC model name (e.g. jsc-tiny, jsc-mlp:16-64-32-32-5)")->capture_default_str();
  bt->add_option("--rows", bt_rows, "training rows in the epoch")->capture_default_str();
  bt->add_option("--batch-size", bt_batch, "rows per batch")->capture_default_str();
  for (auto* sub : {bq, bg, ba, bt}) {
    sub->add_flag("--json", as_json, "print one JSON object");
    sub->add_option("--threads", bench_threads, "threads")->capture_default_str();
  }

  auto* dl = app.add_subcommand("download", "Download a dataset or pretrained BERT into the cache (checksum-verified)");
  std::string dl_name, dl_dir;
  dl->add_option("NAME", dl_name, "jsc, imdb, bert-tiny (or another preset), or a Hugging Face owner/name")->required();
  dl->add_option("--dir", dl_dir, "put it in DIR/<dataset>/ instead of the cache (e.g. $QNUM_DATA_DIR)");

  const qnum::cli::TrainCommand train_cmd(app);
  const qnum::cli::TestCommand test_cmd(app);
  const qnum::cli::PredictCommand predict_cmd(app);
  const qnum::cli::TransformCommand transform_cmd(app);
  const qnum::cli::ReportCommand report_cmd(app);
  const qnum::cli::SearchCommand search_cmd(app);
  const qnum::cli::StudyCommand study_cmd(app);
  // MASE's `ch` spellings on the four commands ch has (examples/cli/mase_flags.hpp).
  const qnum::cli::MaseFlags mase_train(app, "train", qnum::mase::Command::train);
  const qnum::cli::MaseFlags mase_test(app, "test", qnum::mase::Command::test);
  const qnum::cli::MaseFlags mase_transform(app, "transform", qnum::mase::Command::transform);
  const qnum::cli::MaseFlags mase_search(app, "search", qnum::mase::Command::search);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes arguments as they are: escaped like a qnum::Error, so still one line.
    std::cerr << "qnum: error: " << qnum::detail::one_line(e.what()) << "\n";
    return kUsageError;
  }

  try {
    qnum::cli::register_models_from_env();  // the user's own model names ($QNUM_MODELS)
    for (const auto* m : {&mase_train, &mase_test, &mase_transform, &mase_search}) m->explain();
    if (*formats) {
      if (describe.empty())
        list_formats();
      else
        describe_format(describe, mode_policy(mode));
    } else if (*quant) {
      quantize_file(spec, mode_policy(mode), role, seed, seed_opt->count() > 0, uniforms, in_path, out_path);
    } else if (*bq) {
      print_bench(qnum::cli::bench_quantize_json(qnum::Format::parse(bq_spec, mode_policy(bq_mode)), bq_size,
                                                 bench_threads, bq_sigma),
                  as_json);
    } else if (*bg) {
      print_bench(bench_gemm_json(gm, gn, gk, gkind, bench_threads), as_json);
    } else if (*ba) {
      print_bench(qnum::cli::bench_attention_json(aseq, aheads, adim, bench_threads), as_json);
    } else if (*bt) {
      print_bench(qnum::cli::bench_train_json(qnum::cli::bench_train(bt_model, bt_rows, bt_batch, bench_threads)),
                  as_json);
    } else if (*dl) {
      qnum::cli::download_dataset(dl_name, dl_dir);
    } else if (train_cmd.parsed()) {
      train_cmd.run();
    } else if (test_cmd.parsed()) {
      test_cmd.run();
    } else if (predict_cmd.parsed()) {
      predict_cmd.run();
    } else if (transform_cmd.parsed()) {
      transform_cmd.run();
    } else if (report_cmd.parsed()) {
      report_cmd.run();
    } else if (search_cmd.parsed()) {
      search_cmd.run();
    } else if (study_cmd.parsed()) {
      study_cmd.run();
    } else if (*demo_cmd) {
      qnum::detail::require(size >= 64 && size % 64 == 0 && size <= (1LL << 28), "--size ", size,
                            " must be a positive multiple of 64 up to 2^28");
      demo(size, demo_seed);
    }
  } catch (const qnum::Error& e) {
    std::cerr << "qnum: error: " << e.what() << "\n";
    return kUsageError;
  } catch (const std::exception& e) {
    std::cerr << "qnum: error: " << qnum::detail::one_line(e.what()) << "\n";
    return 1;
  }
  return 0;
}
