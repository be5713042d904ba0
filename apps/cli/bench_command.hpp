// `qnum bench quantize|gemm|attention|train|train-step|infer`: a kernel against its baseline in
// the same run (bench_quantize.hpp, common/bench_gemm.hpp, bench_attention.hpp,
// common/bench_train.hpp), or a BERT training step or inference per format to set beside
// PyTorch's (common/bench_train_step.hpp, common/bench_infer.hpp), printed as `key  value`
// lines (a table for infer) or one JSON object.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "bench_attention.hpp"
#include "bench_quantize.hpp"
#include "common/bench_gemm.hpp"
#include "common/bench_infer.hpp"
#include "common/bench_train.hpp"
#include "common/bench_train_step.hpp"
#include "format_commands.hpp"

namespace qnum::cli {

class BenchCommand {
 public:
  explicit BenchCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("bench", "Measure kernels against their baseline in the same run");
    cmd_->require_subcommand(1);
    quantize_ = cmd_->add_subcommand("quantize", "quantize GB/s vs memcpy of the same buffer");
    quantize_->add_option("--format,-f", q_spec_, "format SPEC")->required();
    quantize_->add_option("--mode", q_mode_, "exact or mase")->capture_default_str();
    quantize_->add_option("--size", q_size_, "number of floats")->capture_default_str();
    quantize_->add_option("--sigma", q_sigma_, "standard deviation of the normal test data (0.02: BERT's weight scale)")
        ->capture_default_str();
    gemm_ = cmd_->add_subcommand("gemm", "GEMM GFLOP/s vs fp32 GEMM of the same shape");
    gemm_->add_option("--m", g_m_, "rows of A and C")->capture_default_str();
    gemm_->add_option("--n", g_n_, "columns of C")->capture_default_str();
    gemm_->add_option("--k", g_k_, "reduction length")->capture_default_str();
    gemm_->add_option("--kind", g_kind_, "fp32, bf16, int8, mxint8 or binary")->capture_default_str();
    attention_ = cmd_->add_subcommand("attention", "fused (flash-style) vs naive attention forward");
    attention_->add_option("--seq", a_seq_, "sequence length")->capture_default_str();
    attention_->add_option("--heads", a_heads_, "attention heads")->capture_default_str();
    attention_->add_option("--head-dim", a_dim_, "head dimension")->capture_default_str();
    train_ = cmd_->add_subcommand("train", "one training epoch of a JSC model on jsc-synthetic (Adam)");
    train_->add_option("--model", t_model_, "JSC model name (e.g. jsc-tiny, jsc-mlp:16-64-32-32-5)")
        ->capture_default_str();
    train_->add_option("--rows", t_rows_, "training rows in the epoch")->capture_default_str();
    train_->add_option("--batch-size", t_batch_, "rows per batch")->capture_default_str();
    step_ = cmd_->add_subcommand("train-step", "one BERT training step (AdamW, clipping) in fp32 or bf16 products");
    step_->add_option("--model", s_model_, "BERT name (bert-tiny ... bert-base, bert:L-H-A-I)")->capture_default_str();
    step_->add_option("--batch", s_batch_, "sequences per batch")->capture_default_str();
    step_->add_option("--seq", s_seq_, "tokens per sequence")->capture_default_str();
    step_->add_option("--precision", s_precision_, "fp32 or bf16")->capture_default_str();
    step_->add_option("--steps", s_steps_, "timed steps (after one warm-up step)")->capture_default_str();
    infer_ = cmd_->add_subcommand("infer", "BERT classifier inference per weight format (fp32, int8 W8A8, mxint8)");
    infer_->add_option("--model", i_model_, "BERT name (bert-tiny ... bert-base, bert:L-H-A-I)")->capture_default_str();
    infer_->add_option("--formats", i_formats_, "comma list of fp32, int8, mxint8")->capture_default_str();
    infer_->add_option("--batch", i_batch_, "sequences per batch")->capture_default_str();
    infer_->add_option("--seq", i_seq_, "tokens per sequence")->capture_default_str();
    infer_->add_option("--steps", i_steps_, "timed forwards per format (after one warm-up)")->capture_default_str();
    for (auto* sub : {quantize_, gemm_, attention_, train_, step_, infer_}) {
      sub->add_flag("--json", json_, "print one JSON object");
      sub->add_option("--threads", threads_, "threads")->capture_default_str();
    }
  }
  BenchCommand(const BenchCommand&) = delete;  // CLI11 holds pointers to the members
  BenchCommand& operator=(const BenchCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }
  void run() const {
    if (*quantize_)
      print(bench_quantize_json(Format::parse(q_spec_, mode_policy(q_mode_)), q_size_, threads_, q_sigma_));
    else if (*gemm_)
      print(bench_gemm_json(g_m_, g_n_, g_k_, g_kind_, threads_));
    else if (*attention_)
      print(bench_attention_json(a_seq_, a_heads_, a_dim_, threads_));
    else if (*train_)
      print(bench_train_json(bench_train(t_model_, t_rows_, t_batch_, threads_)));
    else if (*step_)
      print(bench_train_step_json(bench_train_step(s_model_, s_batch_, s_seq_, s_precision_, threads_, s_steps_)));
    else if (*infer_) {
      const auto r = bench_infer(i_model_, i_formats_, i_batch_, i_seq_, threads_, i_steps_);
      std::cout << (json_ ? bench_infer_json(r) + "\n" : bench_infer_table(r));
    }
  }

 private:
  /// Prints a benchmark result: the JSON line itself, or `key  value` lines for people.
  void print(const std::string& json) const {
    if (json_) {
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

  CLI::App *cmd_ = nullptr, *quantize_ = nullptr, *gemm_ = nullptr, *attention_ = nullptr, *train_ = nullptr,
           *step_ = nullptr, *infer_ = nullptr;
  bool json_ = false;
  int threads_ = 1;
  std::string q_spec_, q_mode_ = "exact";
  std::int64_t q_size_ = 1 << 22;
  float q_sigma_ = 2.0f;
  std::int64_t g_m_ = 1024, g_n_ = 1024, g_k_ = 1024;
  std::string g_kind_ = "fp32";
  std::int64_t a_seq_ = 512, a_heads_ = 12, a_dim_ = 64;
  std::string t_model_ = "jsc-tiny";
  std::int64_t t_rows_ = 600000, t_batch_ = 256;
  std::string s_model_ = "bert-tiny", s_precision_ = "fp32";
  std::int64_t s_batch_ = 32, s_seq_ = 128;
  int s_steps_ = 5;
  std::string i_model_ = "bert-tiny", i_formats_ = "fp32,int8,mxint8";
  std::int64_t i_batch_ = 32, i_seq_ = 128;
  int i_steps_ = 5;
};

}  // namespace qnum::cli
