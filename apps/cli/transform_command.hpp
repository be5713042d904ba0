// `qnum transform --config x.toml` (MASE's `ch transform`, spec/system.md §11) and
// `qnum report MODEL --load CKPT` (MASE's report/profile/FLOPs analyses). The config may be
// TOML (MASE's lab files) or JSON (MASE's pass_args dicts; a file ending in .json).
//
// Both take any registered model (qnum/pipeline/registry.hpp): JSC models on feature datasets,
// BERT models (bert-tiny, bert:L-H-A-I, a folder with config.json) on text datasets, which
// are tokenized as the checkpoint's training run did (its max_length unless --max-length).
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
// batch_size, seed, threads (model: the MODEL argument, when given, instead; dataset: the
// checkpoint's, when neither the config nor --dataset names one); [passes.quantize] (by, default,
// <op|name|regex>.config), [passes.prune] (weight, activation, seed), [passes.lora] (rank, lora_alpha, lora_dropout,
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
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "qnum/pipeline/bert_run.hpp"
#include "qnum/io/config_file.hpp"
#include "qnum/pipeline/datasets.hpp"
#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/mase_config.hpp"
#include "qnum/kernel/threading.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/pipeline/checkpoint.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/passes/passes.hpp"
#include "qnum/train/train.hpp"

namespace qnum::cli {

namespace detail {

/// graph report + FLOPs/BitOPs + model size of `model` traced on `example`.
/// (tokens: the example holds token ids [texts, tokens]).
inline std::string analysis_text(nn::Module& model, const Tensor& example, const std::string& title,
                                 bool tokens = false) {
  const auto t = passes::trace(model, example);
  const auto size = passes::model_size(model);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\nModel size: %lld parameters, %.0f bits under its formats (%.0f as float32; %.2fx smaller); "
                "%lld weights pruned\n",
                static_cast<long long>(size.parameters), size.bits, size.float32_bits, size.ratio(),
                static_cast<long long>(size.pruned));
  return "# " + title + "\n\n" + passes::graph_report(t) + "\nFLOPs and BitOPs for a batch of " +
         std::to_string(example.shape()[0]) +
         (tokens ? " texts of " + std::to_string(example.shape()[1]) + " tokens" : std::string()) +
         " (see docs/passes.md for the formulas)\n" + passes::cost(t).table() + buf;
}

/// The leaf layers of `model` (module paths), for messages.
inline std::string layer_names(nn::Module& model) {
  std::string s;
  for (const auto& [path, m] : model.named_modules())
    if (!path.empty() && m->children().empty()) s += (s.empty() ? "" : ", ") + path;
  return s;
}

}  // namespace detail

/// The `transform` subcommand.
class TransformCommand {
 public:
  explicit TransformCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("transform", "Apply quantize/prune/LoRA passes from a TOML config to a checkpoint");
    cmd_->add_option("MODEL", model_, "model the checkpoint holds (overrides the config's 'model'; e.g. bert-tiny)");
    cmd_->add_option("--config", config_, "TOML file (MASE's keys and [passes.*] tables)")->required();
    cmd_->add_option("--load", load_, "checkpoint to transform (overrides load_name)");
    cmd_->add_option("--output-dir", output_dir_, "where results go (overrides output_dir)");
    cmd_->add_option("--save", output_dir_, "the same as --output-dir");
    cmd_->add_option("--dataset", dataset_, "dataset (overrides the config's, e.g. jsc-synthetic)");
    cmd_->add_option("--max-length", max_length_, "text models: tokens per text (default: the checkpoint's run)");
    cmd_->add_option("--limit", limit_, "text models: at most N rows per split");
    cmd_->add_flag("--json", json_, "print the summary as one JSON object");
  }
  TransformCommand(const TransformCommand&) = delete;
  TransformCommand& operator=(const TransformCommand&) = delete;
  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    using qnum::detail::require;
    const auto cfg = io::toml_file_as_json(config_);
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
    Job job;
    job.model = !model_.empty() ? model_ : str({"model"}, "");
    require(!job.model.empty(), where, ": 'model' is required (or the MODEL argument)");
    const std::string load = !load_.empty() ? load_ : str({"load_name", "load"}, "");
    require(!load.empty(), where, ": the checkpoint to transform is required ('load_name' or --load)");
    const std::string out_text = !output_dir_.empty() ? output_dir_ : str({"output_dir", "project_dir"}, "");
    require(!out_text.empty(), where, ": 'output_dir' is required (or --output-dir)");
    job.batch = cfg.value("batch_size", 256);
    require(job.batch >= 1, where, ": batch_size must be >= 1");
    job.seed = cfg.value("seed", std::uint64_t{0});
    if (cfg.contains("threads")) set_num_threads(cfg["threads"].get<int>());

    job.passes = cfg.value("passes", nlohmann::json::object());
    io::require_keys(job.passes, where + " [passes]",
                         {"quantize", "prune", "lora", "report_graph", "summarize_quantization", "profile_statistics"});
    job.tcfg = cfg.value("transform", nlohmann::json::object());
    io::require_keys(job.tcfg, where + " [transform]",
                         {"style", "finetune_epochs", "learning_rate", "optimizer", "schedule"});
    job.finetune = job.tcfg.value("finetune_epochs", 0);
    require(job.finetune >= 0, where, ": finetune_epochs must be >= 0");

    // Never overwrite the input: the output directory must not be where the checkpoint is.
    job.out_dir = out_text;
    job.load = load;
    const auto input_file = std::filesystem::weakly_canonical(train::detail::tensor_file(load));
    require(std::filesystem::exists(input_file), "checkpoint '", input_file.string(), "' not found");
    require(std::filesystem::weakly_canonical(job.out_dir) != input_file.parent_path(), where, ": output_dir '",
            out_text, "' holds the input checkpoint; choose another directory (the input is never overwritten)");

    job.meta = train::read_checkpoint_meta(load);
    job.dataset = !dataset_.empty() ? dataset_ : str({"dataset"}, job.meta.value("dataset", std::string()));
    require(!job.dataset.empty(), where, ": 'dataset' is required");
    pipeline::require_matching_data(job.model, job.dataset);
    const pipeline::Classifier m = pipeline::load_classifier(job.model, load, job.meta);
    if (m.input == pipeline::InputKind::tokens) job.max_length = pipeline::run_max_length(job.meta, max_length_);
    pipeline::with_splits(m.input, job.dataset, job.max_length, limit_, load, [&](const auto& data) { transform(m, data, job); });
  }

 private:
  /// What run() read from the config and the command line.
  struct Job {
    std::string model, dataset, load;
    std::filesystem::path out_dir;
    nlohmann::json meta, passes, tcfg;
    std::int64_t batch = 256, max_length = 0;
    std::uint64_t seed = 0;
    int finetune = 0;
  };

  /// What the passes made of the model.
  struct Applied {
    passes::CompressReport done;
    std::optional<passes::TrainableReport> trainable;
  };

  /// Evaluates, applies the passes, evaluates again, fine-tunes, writes (Splits: the feature
  /// splits of a JSC model or the token splits of a text model).
  template <class Splits>
  void transform(const pipeline::Classifier& m, const Splits& data, const Job& job) const {
    const auto before = train::evaluate(*m.module, m.forward, data.test, job.batch);
    nlohmann::json summary{{"model", job.model},
                           {"dataset", job.dataset},
                           {"checkpoint", job.load},
                           {"before", {{"loss", before.loss}, {"accuracy", before.accuracy}}}};
    const Applied applied = apply_passes(m, data, job);
    std::filesystem::create_directories(job.out_dir);
    report_passes(applied, *m.module, job, summary);
    const auto after = train::evaluate(*m.module, m.forward, data.test, job.batch);
    summary["after"] = {{"loss", after.loss}, {"accuracy", after.accuracy}};
    const nlohmann::json extra = run_metadata(m, data, job);
    if (job.finetune > 0) finetune(m, data, job, extra, summary);
    write_outputs(m, data, job, extra, summary);
    if (json_) {
      std::cout << summary.dump() << "\n";
      return;
    }
    std::printf("accuracy  before %.4f  after passes %.4f", before.accuracy, after.accuracy);
    if (summary.contains("finetuned"))
      std::printf("  after fine-tuning %.4f", summary["finetuned"]["accuracy"].get<double>());
    std::printf("\nwrote %s (and the reports beside it)\n", summary["output"].get<std::string>().c_str());
  }

  /// Quantize and prune (every section checked before anything is applied), then LoRA.
  template <class Splits>
  static Applied apply_passes(const pipeline::Classifier& m, const Splits& data, const Job& job) {
    nlohmann::json pipeline = nlohmann::json::object();
    const nlohmann::json& passes_cfg = job.passes;
    if (passes_cfg.contains("quantize")) pipeline["quantize"] = passes_cfg["quantize"];
    if (passes_cfg.contains("prune")) {
      pipeline["prune"] = passes_cfg["prune"];
      if (pipeline["prune"].is_object() && !pipeline["prune"].contains("seed")) pipeline["prune"]["seed"] = job.seed;
    }
    std::optional<passes::LoraConfig> lora;
    if (passes_cfg.contains("lora")) lora = passes::parse_lora_config(passes_cfg["lora"]);
    Applied a;
    if constexpr (std::is_same_v<Splits, data::TextSplits>) {
      // Calibration (global activation pruning): the first training batch, in dataset order.
      a.done = passes::compress(*m.module, pipeline, [&] {
        for (const data::Batch& b : data::batches(data.train, {job.batch, false, false, 0})) {
          m.forward(b);
          break;
        }
      });
    } else {
      a.done = passes::compress(*m.module, pipeline, {data.train.features});
    }
    if (lora) a.trainable = passes::insert_lora(*m.module, *lora);
    return a;
  }

  /// The passes' reports: warnings, CSVs in the output directory, lines on stdout, summary keys.
  static void report_passes(const Applied& a, nn::Module& model, const Job& job, nlohmann::json& summary) {
    const std::filesystem::path& out_dir = job.out_dir;
    if (a.done.quantize) {
      const auto& q = *a.done.quantize;
      for (const auto& w : q.warnings) std::cerr << "qnum: warning: " << w << "\n";
      if (q.changed() == 0 && q.warnings.empty())
        std::cerr << "qnum: warning: the quantize config matched no layer of " << job.model
                  << " (layers: " << detail::layer_names(model) << ")\n";
      passes::write_quantize_csvs(q, out_dir.string());
      std::cout << "quantize: " << q.changed() << " layer(s) changed\n"
                << passes::summary_table(passes::summarize_quantization(q));
      summary["quantized_layers"] = q.changed();
    }
    if (a.done.prune) {
      std::string csv = "layer,weights,pruned,sparsity,activation\n";
      for (const auto& r : a.done.prune->rows)
        csv += r.path + "," + std::to_string(r.weights) + "," + std::to_string(r.pruned) + "," +
               qnum::detail::format_double(r.sparsity()) + "," + r.activation + "\n";
      write_file_atomic(out_dir / "prune.csv", csv);
      std::printf("prune: weight sparsity %.4f over %zu layer(s)\n", a.done.prune->weight_sparsity(),
                  a.done.prune->rows.size());
      summary["weight_sparsity"] = a.done.prune->weight_sparsity();
    }
    if (a.trainable) {
      write_file_atomic(out_dir / "trainable_parameters.txt", a.trainable->table());
      std::printf("lora: %lld of %lld parameters trainable\n", static_cast<long long>(a.trainable->trainable()),
                  static_cast<long long>(a.trainable->total()));
      summary["trainable_parameters"] = a.trainable->trainable();
    }
  }

  /// What a checkpoint records to be rebuilt and fed the same tokens or rows (qnum test/predict).
  template <class Splits>
  static nlohmann::json run_metadata(const pipeline::Classifier& m, const Splits& data, const Job& job) {
    if constexpr (std::is_same_v<Splits, data::TextSplits>) {
      nlohmann::json extra = pipeline::bert_metadata(models::BertConfig::from_json(m.config, job.model), data);
      nlohmann::json rc = job.meta.value("config", nlohmann::json::object());
      if (!rc.is_object()) rc = nlohmann::json::object();
      rc["max_length"] = job.max_length;
      extra["config"] = rc;
      return extra;
    } else {
      return pipeline::feature_metadata(data);
    }
  }

  /// [transform] finetune_epochs with the model's recipe (JSC: Adam 1e-3, cosine) unless the
  /// config says otherwise; the run goes to <output_dir>/finetune.
  template <class Splits>
  static void finetune(const pipeline::Classifier& m, const Splits& data, const Job& job, const nlohmann::json& extra,
                       nlohmann::json& summary) {
    constexpr bool tokens = std::is_same_v<Splits, data::TextSplits>;
    train::TrainConfig tc;
    if constexpr (tokens) {
      tc = pipeline::default_recipe(job.model);
      tc.max_length = job.max_length;
    }
    tc.model = job.model;
    tc.dataset = job.dataset;
    tc.max_epochs = job.finetune;
    tc.batch_size = job.batch;
    tc.seed = job.seed;
    tc.learning_rate = job.tcfg.value("learning_rate", tokens ? tc.learning_rate : 1e-3);
    tc.optimizer = job.tcfg.value("optimizer", tokens ? tc.optimizer : std::string("adam"));
    tc.schedule = job.tcfg.value("schedule", tokens ? tc.schedule : std::string("cosine"));
    tc.output_dir = (job.out_dir / "finetune").string();
    tc.progress = false;
    train::Trainer t(m.module, m.forward, tc);
    t.set_extra_metadata(extra);
    t.fit(data.train, data.val);
    const auto tuned = train::evaluate(*m.module, m.forward, data.test, job.batch);
    summary["finetuned"] = {{"epochs", job.finetune}, {"loss", tuned.loss}, {"accuracy", tuned.accuracy}};
  }

  /// report.txt and graph.dot (traced on one test sample), the transformed checkpoint with
  /// its metadata, summary.json.
  template <class Splits>
  static void write_outputs(const pipeline::Classifier& m, const Splits& data, const Job& job,
                            const nlohmann::json& extra, nlohmann::json& summary) {
    constexpr bool tokens = std::is_same_v<Splits, data::TextSplits>;
    nn::Module& model = *m.module;
    Tensor example;
    if constexpr (tokens) {
      const std::int64_t len = data.test.size() > 0 ? data.test.length(0) : 16;
      example = pipeline::trace_example(m, 1, std::max<std::int64_t>(1, std::min<std::int64_t>(job.max_length, len)),
                                      &data.test);
    } else {
      example = data.test.features.size(0) > 0 ? data.test.subset(std::vector<std::int64_t>{0}).features
                                               : Tensor::zeros({1, models::kJscFeatures});
    }
    const std::filesystem::path& out_dir = job.out_dir;
    write_file_atomic(out_dir / "report.txt",
                      detail::analysis_text(model, example, job.model + " after transform", tokens));
    write_file_atomic(out_dir / "graph.dot", passes::to_dot(passes::trace(model, example), job.model));
    nlohmann::json meta{{"model", job.model},
                        {"dataset", job.dataset},
                        {"source_checkpoint", job.load},
                        {"passes", job.passes},
                        {"structure", passes::describe_structure(model)},
                        {"summary", summary}};
    for (const auto& [k, v] : extra.items()) meta[k] = v;
    if constexpr (tokens) write_file_atomic(out_dir / "config.json", m.config.dump(2) + "\n");
    train::save_checkpoint(out_dir, "transformed", model, nullptr, meta);
    summary["output"] = (out_dir / "transformed.safetensors").string();
    write_file_atomic(out_dir / "summary.json", summary.dump(2) + "\n");
  }

  CLI::App* cmd_ = nullptr;
  std::string model_, config_, load_, output_dir_, dataset_;
  std::int64_t max_length_ = 0, limit_ = 0;
  bool json_ = false;
};

/// The `report` subcommand.
class ReportCommand {
 public:
  explicit ReportCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("report", "Graph report, FLOPs/BitOPs, model size and statistics of a model");
    cmd_->add_option("MODEL", model_, "model name (e.g. jsc-tiny, bert-tiny)")->required();
    cmd_->add_option("--load", load_, "checkpoint (default: the freshly initialised model)");
    cmd_->add_option("--dataset", dataset_, "profile activations on this dataset's training split");
    cmd_->add_option("--batches", batches_, "batches to profile")->capture_default_str();
    cmd_->add_option("--batch-size", batch_size_, "rows per batch (also the FLOPs batch)")->capture_default_str();
    cmd_->add_option("--seq-len", seq_len_, "text models: tokens per text of the FLOPs batch")->capture_default_str();
    cmd_->add_option("--dot", dot_, "write the op graph in Graphviz DOT to this file");
  }
  ReportCommand(const ReportCommand&) = delete;
  ReportCommand& operator=(const ReportCommand&) = delete;
  bool parsed() const { return cmd_->parsed(); }

  void run() const {
    qnum::detail::require(batch_size_ >= 1, "report: --batch-size must be >= 1");
    qnum::detail::require(batches_ >= 1, "report: --batches must be >= 1");
    qnum::detail::require(seq_len_ >= 1, "report: --seq-len must be >= 1");
    const pipeline::Classifier m = load_.empty()
                                     ? pipeline::make_classifier(model_)
                                     : pipeline::load_classifier(model_, load_, train::read_checkpoint_meta(load_));
    nn::Module& model = *m.module;
    const bool tokens = m.input == pipeline::InputKind::tokens;
    const Tensor example = pipeline::trace_example(m, batch_size_, seq_len_);
    std::cout << detail::analysis_text(model, example, model_ + (load_.empty() ? "" : " from " + load_), tokens);
    if (!dataset_.empty()) {
      pipeline::require_matching_data(model_, dataset_);
      const auto meta = load_.empty() ? nlohmann::json::object() : train::read_checkpoint_meta(load_);
      const std::int64_t max_length = pipeline::run_max_length(meta, load_.empty() ? seq_len_ : 0);
      const auto [n, table] = pipeline::with_splits(m.input, dataset_, max_length, 0, load_, [&](const auto& data) {
        // The first --batches training batches in dataset order, through the model's Forward.
        std::int64_t seen = 0;
        const auto p = passes::profile_statistics(model, [&] {
          for (const data::Batch& b : data::batches(data.train, {batch_size_, false, false, 0})) {
            if (seen == batches_) break;
            m.forward(b);
            ++seen;
          }
        });
        return std::make_pair(seen, p.table());
      });
      std::cout << "\nStatistics (weights; activations = each layer's input over " << n << " batch(es) of " << dataset_
                << (tokens ? ", " + std::to_string(max_length) + " tokens per text" : std::string()) << ")\n"
                << table;
    }
    if (!dot_.empty()) write_file_atomic(dot_, passes::to_dot(passes::trace(model, example), model_));
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string model_, load_, dataset_, dot_;
  std::int64_t batches_ = 4, batch_size_ = 256, seq_len_ = 128;
};

}  // namespace qnum::cli
