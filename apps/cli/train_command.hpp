// `qnum train MODEL DATASET [options]`: MASE's `ch train jsc-tiny jsc` (spec/system.md §11)
// for every model on the one trainer (train/trainer.hpp). Settings: the model's default
// recipe (JSC: MASE's, train::table_recipe; BERT: the text recipe, train::text_recipe) <
// `--config run.toml` < command-line options; with --resume, the defaults are the settings
// saved in the run's `last` checkpoint instead, so `qnum train M D --output-dir DIR --resume
// --max-epochs 30` extends a run without repeating its options (and for BERT rebuilds the
// quantized layers / LoRA adapters it saved). Prints the run and the settings in force
// (stdout), the trainer's per-epoch progress (stderr), then the test-set evaluation of the
// best checkpoint and where the checkpoints and metrics are.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "qnum/pipeline/bert_run.hpp"
#include "qnum/pipeline/datasets.hpp"
#include "qnum/core/error.hpp"
#include "qnum/io/atomic_file.hpp"
#include "qnum/io/json.hpp"
#include "qnum/models/jsc.hpp"
#include "qnum/train/train.hpp"
#include "run_config.hpp"

namespace qnum::cli {

/// The `train` subcommand: its options (registered on construction) and its run.
class TrainCommand {
 public:
  explicit TrainCommand(CLI::App& app) {
    cmd_ = app.add_subcommand("train",
                              "Train a JSC model (MASE's `ch train`) or a BERT on a text dataset; MODEL/DATASET may "
                              "come from --config");
    cmd_->add_option("MODEL", model_,
                     "model: " + join(models::jsc_model_names()) + "; BERT: " + join(models::bert_model_names()));
    cmd_->add_option("DATASET", dataset_,
                     "dataset: " + join(pipeline::dataset_names()) + "; for BERT: " + std::string(data::kTextDatasetNames));
    cmd_->add_option("--config", config_path_, "TOML run config (keys: " + std::string(kRunConfigKeys) + ")");
    cmd_->add_option("--max-epochs", max_epochs_, "epochs to train (default: JSC 20, BERT 1)");
    cmd_->add_option("--max-steps", max_steps_, "stop after this many optimizer steps (MASE/Lightning; -1: no limit)");
    cmd_->add_option("--batch-size", batch_size_, "rows per batch (default: JSC 256, BERT 32)");
    cmd_->add_option("--learning-rate", learning_rate_, "initial learning rate (default 1e-3)");
    cmd_->add_option("--optimizer,--training-optimizer", optimizer_, "adam, adamw or sgd (default: JSC adam, BERT adamw)");
    cmd_->add_option("--schedule", schedule_, "learning rate schedule: cosine, linear or constant (default: JSC cosine, BERT linear)");
    cmd_->add_option("--schedule-unit", schedule_unit_, "the schedule steps per epoch (MASE; JSC default) or per step (HF; BERT default)")
        ->check(CLI::IsMember({"epoch", "step"}));
    cmd_->add_option("--warmup-ratio", warmup_ratio_, "per-step schedules: linear warm-up over this share of steps (default: BERT 0.06)");
    cmd_->add_option("--max-grad-norm", max_grad_norm_, "gradient clipping norm (default: BERT 1, JSC 0 = none)");
    cmd_->add_option("--weight-decay", weight_decay_, "weight decay (default: JSC 0, sgd then uses MASE's 5e-4; BERT 0.01)");
    cmd_->add_option(
        "--seed", seed_,
        "seed of the model initialisation and the batch order (default 0; a BERT run shuffles with 42 unless given)");
    cmd_->add_option("--threads", threads_, "threads (default: all)");
    cmd_->add_option("--device", device_, "where to train: cpu (default) or cuda (BERT models; needs a CUDA build)");
    cmd_->add_option("--accelerator", accelerator_,
                     "MASE's: cpu, or gpu/cuda/auto = --device cuda where a CUDA device is present, else the CPU");
    cmd_->add_option("--output-dir", output_dir_,
                     "where metrics.jsonl and the best/last checkpoints go (default qnum-runs/MODEL_DATASET)");
    cmd_->add_option("--project-dir", project_dir_,
                     "MASE's: the folder of --project's run (default mase_output); without --project, --output-dir");
    cmd_->add_option("--project", project_,
                     "MASE's project: the run goes to <project-dir or mase_output>/PROJECT/software/training_ckpts");
    cmd_->add_option("--log-every-n-steps", log_every_n_steps_,
                     "a metrics.jsonl row (step, loss, learning rate, grad norm) every N optimizer steps (MASE's; "
                     "default 0: one row per epoch)");
    cmd_->add_option("--tensorboard", tensorboard_,
                     "write TensorBoard event files of the run into DIR (loss, learning rate and grad norm per step "
                     "or every --log-every-n-steps, validation per epoch)");
    cmd_->add_option("--precision", precision_,
                     "the products' precision: fp32 (default) or bf16 (bf16 operands, fp32 accumulation and weights; "
                     "Lightning's bf16-mixed)");
    cmd_->add_flag("--resume", resume_, "continue the run saved as `last` in the output directory");
    cmd_->add_flag("--no-progress", no_progress_, "print no per-epoch progress");
    // BERT / text datasets only.
    cmd_->add_option("--max-length", bert_.max_length, "BERT: tokens per text incl. [CLS]/[SEP] (default 512)");
    cmd_->add_option("--limit", bert_.limit, "BERT: keep at most N rows per split (quick runs)");
    cmd_->add_option("--load", bert_.load,
                     "BERT: start from a checkpoint: qnum's or Hugging Face's model.safetensors (config.json beside "
                     "it gives the sizes)");
    cmd_->add_option("--quantize", bert_.quantize, "BERT: quantize config (TOML/JSON) applied before training (QAT)");
    cmd_->add_option("--lora-rank", bert_.lora_rank, "BERT: train LoRA adapters of this rank on query/value");
  }

  TrainCommand(const TrainCommand&) = delete;  // CLI11 holds pointers to the members
  TrainCommand& operator=(const TrainCommand&) = delete;

  bool parsed() const { return cmd_->parsed(); }

  /// Trains as configured; qnum::Error for bad settings, names, data or checkpoints.
  void run() const {
    RunOverrides o;
    if (!config_path_.empty()) o = read_run_config(config_path_);
    o.merge(command_line());
    qnum::detail::require(o.model.has_value(),
                          "train: no MODEL (give it as the first argument or `model` in --config; ",
                          "known: ", pipeline::known_model_names(), ")");
    qnum::detail::require(o.dataset.has_value(), "train: no DATASET (give it as the second argument or `dataset` in ",
                          "--config; known: ", join(pipeline::dataset_names()), ")");
    pipeline::require_matching_data(*o.model, *o.dataset);
    const bool text = pipeline::model_spec(*o.model).input == pipeline::InputKind::tokens;
    train::TrainConfig c = pipeline::default_recipe(*o.model);
    apply(o, c);
    if (resume_) {
      // The saved run's settings are the defaults; the file and the command line still win.
      const auto dir = train::resolve_output_dir(c);
      qnum::detail::require(std::filesystem::exists(dir / "last.safetensors"), "train: cannot resume: no checkpoint '",
                            (dir / "last.safetensors").string(), "' (run without --resume first)");
      const auto meta_file = dir / "last.json";
      if (std::filesystem::exists(meta_file)) {
        const auto meta =
            io::parse_json(read_file(meta_file), "train: cannot resume: '" + meta_file.string() + "'", false);
        qnum::detail::require(meta.is_object(), "train: cannot resume: '", meta_file.string(), "' is not JSON");
        const std::string saved = meta.value("model", std::string());
        qnum::detail::require(saved.empty() || saved == c.model, "train: cannot resume from '", meta_file.string(),
                              "': it holds model '", saved, "', not '", c.model, "'");
        c = train::config_from_json(meta.value("config", nlohmann::json::object()), c, meta_file.string());
        apply(o, c);
      }
    }
    c.progress = !no_progress_;
    train::validate(c);
    if (text) {
      qnum::detail::require(c.max_length >= 2, "train: --max-length must be >= 2 ([CLS] and [SEP]), got ",
                            c.max_length);
      train_text(c, o.seed.value_or(0));
    } else {
      for (const char* name : {"--max-length", "--limit", "--load", "--quantize", "--lora-rank"})
        qnum::detail::require(cmd_->get_option(name)->count() == 0, "train: ", name, " applies to BERT models only, not to ",
                              c.model);
      train_table(c);
    }
  }

 private:
  template <class Names>
  static std::string join(const Names& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }

  /// The given settings, then the command line's recipe options only this command has.
  void apply(const RunOverrides& o, train::TrainConfig& c) const {
    o.apply(c);
    auto given = [&](const char* name) { return cmd_->get_option(name)->count() > 0; };
    if (given("--schedule-unit")) c.schedule_unit = schedule_unit_;
    if (given("--warmup-ratio")) c.warmup_ratio = warmup_ratio_;
    if (given("--max-grad-norm")) c.max_grad_norm = max_grad_norm_;
    if (bert_.max_length) c.max_length = *bert_.max_length;
  }

  /// A JSC model on a feature table.
  void train_table(const train::TrainConfig& c) const {
    const pipeline::Classifier m = pipeline::make_classifier(c.model, {c.seed});
    const auto& model = m.module;
    const data::JscSplits data = pipeline::load_dataset(c.dataset);
    train::Trainer trainer(model, m.forward, c);
    trainer.set_extra_metadata(pipeline::feature_metadata(data));  // qnum predict standardises rows as these were
    std::printf("train    %s (%lld parameters) on %s\n", c.model.c_str(),
                static_cast<long long>(model->num_parameters()), c.dataset.c_str());
    std::printf("data     %s\n", data.summary().c_str());
    print_settings(trainer);
    const auto records = trainer.fit(data.train, data.val, resume_);
    // The test set, on the best checkpoint (MASE's lab 1 tests best.ckpt).
    const pipeline::Classifier best = pipeline::make_classifier(c.model, {c.seed});
    const auto meta = train::load_checkpoint(trainer.best_checkpoint(), *best.module, nullptr);
    print_outcome(trainer, train::evaluate(*best.module, best.forward, data.test, c.evaluation_batch_size()), meta,
                  records);
  }

  /// A BERT on a text dataset: --load (qnum's or Hugging Face's weights), --quantize (QAT),
  /// --lora-rank; on --resume the saved structure (quantized layers, adapters) instead.
  void train_text(const train::TrainConfig& c, std::uint64_t init_seed) const {
    if (c.threads > 0) set_num_threads(c.threads);
    // --load: a qnum checkpoint, an HF file or folder, or a hub name (downloaded once into the cache).
    const std::string load = bert_.load.empty() ? "" : data::resolve_pretrained(bert_.load).string();
    const data::TextSplits data =
        pipeline::load_text_splits(c.dataset, c.max_length, bert_.limit.value_or(0), pipeline::vocab_beside(load));
    const auto out = train::resolve_output_dir(c);
    const std::string config_from = resume_ && std::filesystem::exists(out / "config.json")
                                        ? (out / "last.safetensors").string()
                                        : load;
    const models::BertConfig bc = pipeline::bert_run_config(c.model, config_from, data);
    qnum::detail::require(c.max_length <= bc.max_position_embeddings, "train: --max-length ", c.max_length,
                          " exceeds the model's max_position_embeddings ", bc.max_position_embeddings);
    // On --resume the saved run's initialisation seed: the dropout layers' seeds follow it.
    nlohmann::json last_meta = nlohmann::json::object();
    if (resume_) last_meta = train::read_checkpoint_meta(out / "last.safetensors");
    if (last_meta.contains("init_seed") && last_meta["init_seed"].is_number_unsigned())
      init_seed = last_meta["init_seed"].get<std::uint64_t>();
    auto model = std::make_shared<models::BertForSequenceClassification>(bc, init_seed);
    if (resume_) {
      // The trainer loads the weights; the structure must exist before its optimizer does.
      if (last_meta.contains("structure")) passes::restore_structure(*model, last_meta["structure"]);
    } else {
      if (!load.empty()) pipeline::load_bert_weights(*model, load);
      pipeline::apply_bert_passes(*model, bert_);
    }
    train::Trainer trainer(model, models::bert_forward(model), c);
    nlohmann::json extra = pipeline::bert_metadata(bc, data);
    extra["init_seed"] = init_seed;
    trainer.set_extra_metadata(extra);
    std::printf("train    %s (%lld parameters; %lld layers, hidden %lld, heads %lld, intermediate %lld) on %s\n",
                c.model.c_str(), static_cast<long long>(model->num_parameters()),
                static_cast<long long>(bc.num_hidden_layers), static_cast<long long>(bc.hidden_size),
                static_cast<long long>(bc.num_attention_heads), static_cast<long long>(bc.intermediate_size),
                c.dataset.c_str());
    std::printf("data     %s\n", data.summary().c_str());
    print_settings(trainer);
    std::filesystem::create_directories(trainer.output_dir());
    write_file_atomic(trainer.output_dir() / "config.json", bc.to_json().dump(2) + "\n");
    const auto records = trainer.fit(data.train, data.val, resume_);
    // The test set on the best checkpoint.
    auto best = std::make_shared<models::BertForSequenceClassification>(bc, 0);
    const auto meta = pipeline::load_bert_weights(*best, trainer.best_checkpoint().string());
    print_outcome(trainer,
                  train::evaluate(*best, models::bert_forward(best), data.test, c.evaluation_batch_size(),
                                  c.pad_to_multiple_of),
                  meta, records);
  }

  /// The recipe in force and where the run goes.
  void print_settings(const train::Trainer& t) const {
    const train::TrainConfig& c = t.config();
    std::printf("settings max_epochs %d, batch_size %lld, learning_rate %g, optimizer %s, schedule %s per %s",
                c.max_epochs, static_cast<long long>(c.batch_size), c.learning_rate, c.optimizer.c_str(),
                c.schedule.c_str(), c.schedule_unit.c_str());
    if (c.schedule_unit == "step") std::printf(" (warmup_ratio %g)", c.warmup_ratio);
    if (c.schedule == "cosine" && c.schedule_unit == "epoch")
      std::printf(" (t_max %d, eta_min %g)", c.t_max > 0 ? c.t_max : c.max_epochs, c.eta_min);
    if (c.max_steps > 0) std::printf(", max_steps %lld", static_cast<long long>(c.max_steps));
    std::printf(", weight_decay %g, max_grad_norm %g", c.weight_decay, c.max_grad_norm);
    if (c.max_length > 0) std::printf(", max_length %lld", static_cast<long long>(c.max_length));
    if (c.precision != "fp32") std::printf(", precision %s", c.precision.c_str());
    std::printf(", seed %llu%s\n", static_cast<unsigned long long>(c.seed), resume_ ? " (resuming)" : "");
    std::printf("output   %s\n", t.output_dir().string().c_str());
    if (!c.tensorboard_dir.empty()) std::printf("tensorboard %s\n", c.tensorboard_dir.c_str());
    std::fflush(stdout);
  }

  /// The test evaluation of the best checkpoint and where the run's files are.
  static void print_outcome(const train::Trainer& t, const train::Evaluation& ev, const nlohmann::json& best_meta,
                            const std::vector<train::EpochRecord>& records) {
    const int best_epoch = best_meta.value("epoch", 0);
    std::printf("test     loss %.6f accuracy %.4f (%lld rows; best checkpoint, epoch %d)\n", ev.loss, ev.accuracy,
                static_cast<long long>(ev.count), best_epoch);
    std::printf("best     %s (epoch %d, val_loss %.6f)\n", t.best_checkpoint().string().c_str(), best_epoch,
                t.best_val_loss());
    std::printf("last     %s (epoch %d)\n", t.last_checkpoint().string().c_str(),
                records.empty() ? 0 : records.back().epoch);
    std::printf("metrics  %s\n", t.metrics_file().string().c_str());
  }

  /// The options given on the command line (positionals included).
  RunOverrides command_line() const {
    RunOverrides o;
    auto given = [&](const char* name) { return cmd_->get_option(name)->count() > 0; };
    if (given("MODEL")) o.model = model_;
    if (given("DATASET")) o.dataset = dataset_;
    if (given("--max-epochs")) o.max_epochs = max_epochs_;
    if (given("--max-steps")) o.max_steps = max_steps_;
    if (given("--project")) o.project = project_;
    if (given("--batch-size")) o.batch_size = batch_size_;
    if (given("--learning-rate")) o.learning_rate = learning_rate_;
    if (given("--optimizer")) o.optimizer = optimizer_;
    if (given("--schedule")) o.schedule = schedule_;
    if (given("--weight-decay")) o.weight_decay = weight_decay_;
    if (given("--seed")) o.seed = seed_;
    if (given("--threads")) o.threads = threads_;
    if (given("--output-dir")) o.output_dir = output_dir_;
    if (given("--project-dir")) o.project_dir = project_dir_;
    if (given("--accelerator")) o.device = accelerator_device(accelerator_, "--");
    if (given("--device")) o.device = Device::parse(device_).str();
    if (given("--log-every-n-steps")) o.log_every_n_steps = log_every_n_steps_;
    if (given("--tensorboard")) o.tensorboard = tensorboard_;
    if (given("--precision")) o.precision = std::string(to_string(parse_precision(precision_)));
    return o;
  }

  CLI::App* cmd_ = nullptr;
  std::string model_, dataset_, config_path_, optimizer_, schedule_, schedule_unit_, output_dir_, device_, project_,
      project_dir_, tensorboard_, accelerator_, precision_;
  std::int64_t max_steps_ = -1, log_every_n_steps_ = 0;
  int max_epochs_ = 0, threads_ = 0;
  std::int64_t batch_size_ = 0;
  double learning_rate_ = 0, weight_decay_ = 0, warmup_ratio_ = 0, max_grad_norm_ = 0;
  std::uint64_t seed_ = 0;
  bool resume_ = false, no_progress_ = false;
  pipeline::BertRunOptions bert_;
};

}  // namespace qnum::cli
