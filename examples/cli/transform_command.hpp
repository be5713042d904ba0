// `qnum transform --config x.toml` (MASE's `ch transform`, spec/system.md §11) and
// `qnum report MODEL --load CKPT` (MASE's report/profile/FLOPs analyses). The config may be
// TOML (MASE's lab files) or JSON (MASE's pass_args dicts; a file ending in .json).
//
// transform: loads a checkpoint, evaluates it, applies the passes of the config (MASE's
// [passes.*] tables) in the compression pipeline's order — quantize, prune, LoRA —,
// evaluates again, optionally fine-tunes (masks, formats and frozen parameters kept), and
// writes into output_dir: transformed.safetensors/.json (metadata: structure, passes, the
// evaluations), quantize_table.csv, quantize_histogram.csv, prune.csv, report.txt (graph,
// FLOPs/BitOPs, model size), graph.dot, summary.json. The input checkpoint is never
// written: output_dir must not hold it.
//
// TOML keys: model, dataset, load_name (alias load), output_dir (alias project_dir),
// batch_size, seed, threads; [passes.quantize] (by, default, <op|name|regex>.config),
// [passes.prune] (weight, activation, seed), [passes.lora] (rank, lora_alpha, lora_dropout,
// target, trainable, seed); MASE's analysis tables [passes.report_graph],
// [passes.summarize_quantization], [passes.profile_statistics] (num_samples) are accepted:
// their reports are always written. [transform]: style ("graph"/"module", MASE's; both do
// the same here), finetune_epochs, learning_rate, optimizer, schedule. Anything else is an
// error naming the key.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "datasets.hpp"
#include "qnum/core/error.hpp"
#include "qnum/core/printable.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/mase_config.hpp"
#include "qnum/io/toml_guard.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/passes/passes.hpp"
#include "qnum/train/train.hpp"

namespace qnum::cli {

namespace detail {

/// A config file as JSON: a .json file as it is, anything else read as TOML (tables →
/// objects, arrays → arrays; integers stay integers).
inline nlohmann::json toml_file_as_json(const std::filesystem::path& file) {
  qnum::detail::require(std::filesystem::is_regular_file(file), "--config: cannot open '", file.string(), "'");
  if (file.extension() == ".json") {
    try {
      auto j = nlohmann::json::parse(read_file(file));
      qnum::detail::require(j.is_object(), file.string(), ": the config must be a JSON object");
      return j;
    } catch (const nlohmann::json::exception& e) {  // syntax errors, and numbers out of double's range
      qnum::detail::fail(file.string(), ": JSON error: ", qnum::detail::printable(e.what(), 200));
    }
  }
  toml::table table;
  try {
    const std::string text = read_file(file);
    io::check_toml_text(text, file.string());  // toml++ 3.3.0 has UB on some non-ASCII text
    table = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    qnum::detail::fail(file.string(), ":", b.line, ":", b.column,
                       ": TOML syntax error: ", qnum::detail::printable(e.description(), 200));
  }
  std::ostringstream out;
  out << toml::json_formatter{table};
  auto j = nlohmann::json::parse(out.str(), nullptr, false);
  // Should toml++'s JSON not parse back (it is not nlohmann's), an error rather than an exception.
  qnum::detail::require(!j.is_discarded(), file.string(), ": a TOML value with no JSON form");
  return j;
}

inline void require_keys(const nlohmann::json& j, const std::string& where,
                         std::initializer_list<const char*> allowed) {
  for (const auto& [key, v] : j.items()) {
    bool ok = false;
    std::string list;
    for (const char* a : allowed) {
      ok |= key == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    qnum::detail::require(ok, where, ": unknown key '", qnum::detail::printable(key, 80), "' (allowed: ", list, ")");
  }
}

/// A model with the structure and values of checkpoint `path`.
inline std::shared_ptr<nn::Sequential> load_model(const std::string& name, const std::string& path) {
  auto model = models::make_jsc_model(name, 0);
  if (const auto meta = train::read_checkpoint_meta(path); meta.contains("structure"))
    passes::restore_structure(*model, meta["structure"]);
  train::load_checkpoint(path, *model, nullptr);
  return model;
}

/// graph report + FLOPs/BitOPs + model size of `model` traced on `example`.
inline std::string analysis_text(nn::Module& model, const Tensor& example, const std::string& title) {
  const auto t = passes::trace(model, example);
  const auto size = passes::model_size(model);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\nModel size: %lld parameters, %.0f bits under its formats (%.0f as float32; %.2fx smaller); "
                "%lld weights pruned\n",
                static_cast<long long>(size.parameters), size.bits, size.float32_bits, size.ratio(),
                static_cast<long long>(size.pruned));
  return "# " + title + "\n\n" + passes::graph_report(t) + "\nFLOPs and BitOPs for a batch of " +
         std::to_string(example.shape()[0]) + " (see docs/passes.md for the formulas)\n" + passes::cost(t).table() +
         buf;
}

}  // namespace detail

/// The `transform` subcommand.
class TransformCommand {
 public:
  explicit TransformCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("transform", "Apply quantize/prune/LoRA passes from a TOML config to a checkpoint");
    cmd_->add_option("--config", config_, "TOML file (MASE's keys and [passes.*] tables)")->required();
    cmd_->add_option("--load", load_, "checkpoint to transform (overrides load_name)");
    cmd_->add_option("--output-dir", output_dir_, "where results go (overrides output_dir)");
    cmd_->add_option("--dataset", dataset_, "dataset (overrides the config's, e.g. jsc-synthetic)");
    cmd_->add_flag("--json", json_, "print the summary as one JSON object");
  }
  TransformCommand(const TransformCommand&) = delete;
  TransformCommand& operator=(const TransformCommand&) = delete;
  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    using qnum::detail::require;
    const auto cfg = detail::toml_file_as_json(config_);
    const std::string where = config_;
    // MASE's keys transform does not read: one line each (qnum/io/mase_config.hpp), then run.
    for (const auto& n :
         mase::plan_top_level(cfg, mase::Command::transform, where, mase::keys_read_by(mase::Command::transform)).notes)
      std::cerr << "note: " << where << ": " << n << "\n";
    auto str = [&](std::initializer_list<const char*> keys, std::string fallback) {
      for (const char* k : keys)
        if (cfg.contains(k)) {
          require(cfg[k].is_string(), where, ": '", k, "' must be a string");
          return cfg[k].get<std::string>();
        }
      return fallback;
    };
    const std::string model_name = str({"model"}, "");
    const std::string dataset = !dataset_.empty() ? dataset_ : str({"dataset"}, "");
    require(!model_name.empty(), where, ": 'model' is required");
    require(!dataset.empty(), where, ": 'dataset' is required");
    const std::string load = !load_.empty() ? load_ : str({"load_name", "load"}, "");
    require(!load.empty(), where, ": the checkpoint to transform is required ('load_name' or --load)");
    const std::string out_text = !output_dir_.empty() ? output_dir_ : str({"output_dir", "project_dir"}, "");
    require(!out_text.empty(), where, ": 'output_dir' is required (or --output-dir)");
    const std::int64_t batch = cfg.value("batch_size", 256);
    require(batch >= 1, where, ": batch_size must be >= 1");
    const std::uint64_t seed = cfg.value("seed", std::uint64_t{0});
    if (cfg.contains("threads")) set_num_threads(cfg["threads"].get<int>());

    const nlohmann::json passes_cfg = cfg.value("passes", nlohmann::json::object());
    detail::require_keys(passes_cfg, where + " [passes]",
                         {"quantize", "prune", "lora", "report_graph", "summarize_quantization", "profile_statistics"});
    const nlohmann::json tcfg = cfg.value("transform", nlohmann::json::object());
    detail::require_keys(tcfg, where + " [transform]",
                         {"style", "finetune_epochs", "learning_rate", "optimizer", "schedule"});

    // Never overwrite the input: the output directory must not be where the checkpoint is.
    const std::filesystem::path out_dir(out_text);
    const auto input_file = std::filesystem::weakly_canonical(train::detail::tensor_file(load));
    require(std::filesystem::exists(input_file), "checkpoint '", input_file.string(), "' not found");
    require(std::filesystem::weakly_canonical(out_dir) != input_file.parent_path(), where, ": output_dir '", out_text,
            "' holds the input checkpoint; choose another directory (the input is never overwritten)");

    auto model = detail::load_model(model_name, load);
    const data::JscSplits data = load_dataset(dataset);
    const auto before = train::evaluate(*model, data.test, batch);
    nlohmann::json summary{{"model", model_name},
                           {"dataset", dataset},
                           {"checkpoint", load},
                           {"before", {{"loss", before.loss}, {"accuracy", before.accuracy}}}};

    // Every section is checked before anything is applied or written.
    nlohmann::json pipeline = nlohmann::json::object();
    if (passes_cfg.contains("quantize")) pipeline["quantize"] = passes_cfg["quantize"];
    if (passes_cfg.contains("prune")) {
      pipeline["prune"] = passes_cfg["prune"];
      if (pipeline["prune"].is_object() && !pipeline["prune"].contains("seed")) pipeline["prune"]["seed"] = seed;
    }
    std::optional<passes::LoraConfig> lora;
    if (passes_cfg.contains("lora")) lora = passes::parse_lora_config(passes_cfg["lora"]);
    const auto done = passes::compress(*model, pipeline, {data.train.features});
    std::optional<passes::TrainableReport> trainable;
    if (lora) trainable = passes::insert_lora(*model, *lora);

    std::filesystem::create_directories(out_dir);
    if (done.quantize) {
      for (const auto& w : done.quantize->warnings) std::cerr << "qnum: warning: " << w << "\n";
      passes::write_quantize_csvs(*done.quantize, out_dir.string());
      std::cout << "quantize: " << done.quantize->changed() << " layer(s) changed\n"
                << passes::summary_table(passes::summarize_quantization(*done.quantize));
      summary["quantized_layers"] = done.quantize->changed();
    }
    if (done.prune) {
      std::string csv = "layer,weights,pruned,sparsity,activation\n";
      for (const auto& r : done.prune->rows)
        csv += r.path + "," + std::to_string(r.weights) + "," + std::to_string(r.pruned) + "," +
               qnum::detail::format_double(r.sparsity()) + "," + r.activation + "\n";
      write_file_atomic(out_dir / "prune.csv", csv);
      std::printf("prune: weight sparsity %.4f over %zu layer(s)\n", done.prune->weight_sparsity(),
                  done.prune->rows.size());
      summary["weight_sparsity"] = done.prune->weight_sparsity();
    }
    if (trainable) {
      write_file_atomic(out_dir / "trainable_parameters.txt", trainable->table());
      std::printf("lora: %lld of %lld parameters trainable\n", static_cast<long long>(trainable->trainable()),
                  static_cast<long long>(trainable->total()));
      summary["trainable_parameters"] = trainable->trainable();
    }
    const auto after = train::evaluate(*model, data.test, batch);
    summary["after"] = {{"loss", after.loss}, {"accuracy", after.accuracy}};

    const int finetune = tcfg.value("finetune_epochs", 0);
    require(finetune >= 0, where, ": finetune_epochs must be >= 0");
    if (finetune > 0) {
      train::TrainConfig tc;
      tc.model = model_name;
      tc.dataset = dataset;
      tc.max_epochs = finetune;
      tc.batch_size = batch;
      tc.seed = seed;
      tc.learning_rate = tcfg.value("learning_rate", 1e-3);
      tc.optimizer = tcfg.value("optimizer", std::string("adam"));
      tc.schedule = tcfg.value("schedule", std::string("cosine"));
      tc.output_dir = (out_dir / "finetune").string();
      tc.progress = false;
      train::Trainer t(model, tc);
      t.fit(data.train, data.val);
      const auto tuned = train::evaluate(*model, data.test, batch);
      summary["finetuned"] = {{"epochs", finetune}, {"loss", tuned.loss}, {"accuracy", tuned.accuracy}};
    }

    const Tensor example = data.test.features.size(0) > 0 ? data.test.subset(std::vector<std::int64_t>{0}).features
                                                          : Tensor::zeros({1, models::kJscFeatures});
    write_file_atomic(out_dir / "report.txt", detail::analysis_text(*model, example, model_name + " after transform"));
    write_file_atomic(out_dir / "graph.dot", passes::to_dot(passes::trace(*model, example), model_name));
    nlohmann::json meta{{"model", model_name},
                        {"dataset", dataset},
                        {"source_checkpoint", load},
                        {"passes", passes_cfg},
                        {"structure", passes::describe_structure(*model)},
                        {"summary", summary}};
    train::save_checkpoint(out_dir, "transformed", *model, nullptr, meta);
    summary["output"] = (out_dir / "transformed.safetensors").string();
    write_file_atomic(out_dir / "summary.json", summary.dump(2) + "\n");
    if (json_) {
      std::cout << summary.dump() << "\n";
      return;
    }
    std::printf("accuracy  before %.4f  after passes %.4f", before.accuracy, after.accuracy);
    if (summary.contains("finetuned"))
      std::printf("  after fine-tuning %.4f", summary["finetuned"]["accuracy"].get<double>());
    std::printf("\nwrote %s (and the reports beside it)\n", summary["output"].get<std::string>().c_str());
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string config_, load_, output_dir_, dataset_;
  bool json_ = false;
};

/// The `report` subcommand.
class ReportCommand {
 public:
  explicit ReportCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("report", "Graph report, FLOPs/BitOPs, model size and statistics of a model");
    cmd_->add_option("MODEL", model_, "model name (e.g. jsc-tiny)")->required();
    cmd_->add_option("--load", load_, "checkpoint (default: the freshly initialised model)");
    cmd_->add_option("--dataset", dataset_, "profile activations on this dataset's training split");
    cmd_->add_option("--batches", batches_, "batches to profile")->capture_default_str();
    cmd_->add_option("--batch-size", batch_size_, "rows per batch (also the FLOPs batch)")->capture_default_str();
    cmd_->add_option("--dot", dot_, "write the op graph in Graphviz DOT to this file");
  }
  ReportCommand(const ReportCommand&) = delete;
  ReportCommand& operator=(const ReportCommand&) = delete;
  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    qnum::detail::require(batch_size_ >= 1, "report: --batch-size must be >= 1");
    qnum::detail::require(batches_ >= 1, "report: --batches must be >= 1");
    auto model = load_.empty() ? models::make_jsc_model(model_, 0) : detail::load_model(model_, load_);
    const Tensor example = Tensor::zeros({batch_size_, models::kJscFeatures});
    std::cout << detail::analysis_text(*model, example, model_ + (load_.empty() ? "" : " from " + load_));
    if (!dataset_.empty()) {
      const auto data = load_dataset(dataset_);
      std::vector<Tensor> batches;
      const std::int64_t n = data.train.size();
      for (std::int64_t b = 0; b < batches_ && b * batch_size_ < n; ++b) {
        std::vector<std::int64_t> idx;
        for (std::int64_t i = b * batch_size_; i < std::min(n, (b + 1) * batch_size_); ++i) idx.push_back(i);
        batches.push_back(data.train.subset(idx).features);
      }
      std::cout << "\nStatistics (weights; activations = each layer's input over " << batches.size() << " batch(es) of "
                << dataset_ << ")\n"
                << passes::profile_statistics(*model, batches).table();
    }
    if (!dot_.empty()) write_file_atomic(dot_, passes::to_dot(passes::trace(*model, example), model_));
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string model_, load_, dataset_, dot_;
  std::int64_t batches_ = 4, batch_size_ = 256;
};

}  // namespace qnum::cli
