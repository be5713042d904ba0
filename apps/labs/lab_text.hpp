// The Lab 1 programs on BERT: TextLab is the JSC `Lab` of lab_common.hpp for a BERT classifier
// on a text dataset (imdb through QNUM_DATA_DIR, text-synthetic offline), trained by the
// Trainer with the recipe of `qnum train bert-tiny imdb` (AdamW, linear warm-up and decay
// per step, grad-norm clipping 1.0). It offers the same members, so the sweeps are written
// once (templates over the lab type).
//
// BERT trains from random initialisation here (no pretrained weights), so its defaults are the
// model's recipe from the registry (pipeline::default_recipe, for BERT train::text_recipe(): 1
// epoch, batch 32, AdamW at 1e-3 with 6% warm-up, weight decay 0.01 and clipping 1.0 — the run
// docs/results.md reports), fine-tuning at a tenth of that rate; --max-length 128 tokens. An
// option given on the command line always wins (apply_text_defaults).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "qnum/pipeline/bert_run.hpp"
#include "lab_common.hpp"
#include "qnum/models/bert.hpp"
#include "qnum/pipeline/registry.hpp"
#include "qnum/train/trainer.hpp"

namespace qnum::labs {

/// The options only text runs take.
struct TextOptions {
  std::int64_t max_length = 128;  ///< tokens per review ([CLS] ... [SEP]), longer ones truncated
  std::int64_t limit = 0;         ///< rows per split (0: all), for quick runs
  double warmup_ratio = train::text_recipe().warmup_ratio;
  double weight_decay = train::text_recipe().weight_decay;
};

inline void add_text_options(CLI::App& app, TextOptions& t) {
  app.add_option("--max-length", t.max_length, "BERT: tokens per text, longer ones truncated")->capture_default_str();
  app.add_option("--limit", t.limit, "BERT: at most this many rows per split (0: all)")->capture_default_str();
  app.add_option("--warmup-ratio", t.warmup_ratio, "BERT: linear warm-up over this fraction of the steps")
      ->capture_default_str();
  app.add_option("--weight-decay", t.weight_decay, "BERT: AdamW's decoupled weight decay")->capture_default_str();
}

/// Whether the lab runs a model of tokenized text (BERT), else one of feature rows: the
/// registry decides, so names of the user's own ($QNUM_MODELS) count as what they stand for.
inline bool is_text_lab(const CommonOptions& o) { return pipeline::model_spec(o.model).input == pipeline::InputKind::tokens; }

/// The model's recipe for the common options the user did not give (see the file comment);
/// the dataset defaults to text-synthetic.
inline void apply_text_defaults(const CLI::App& app, CommonOptions& o) {
  const train::TrainConfig r = pipeline::default_recipe(o.model);
  auto unset = [&](const char* name) {
    const CLI::Option* opt = app.get_option_no_throw(name);  // a program may not offer it
    return opt == nullptr || opt->count() == 0;
  };
  if (unset("--dataset")) o.dataset = "text-synthetic";
  if (unset("--epochs")) o.epochs = r.max_epochs;
  if (unset("--batch-size")) o.batch_size = r.batch_size;
  if (unset("--learning-rate")) o.learning_rate = r.learning_rate;
  if (unset("--finetune-learning-rate")) o.finetune_learning_rate = r.learning_rate / 10;
}

/// A lab run on BERT and a text dataset (the members of `Lab`, for BERT).
class TextLab : public LabBase {
 public:
  using Model = models::BertForSequenceClassification;

  /// Checks the options, loads and tokenizes the dataset, prepares the output directory.
  TextLab(std::string program, CommonOptions o, TextOptions t) : LabBase(std::move(program), std::move(o)), t_(t) {
    using qnum::detail::require;
    require(t_.max_length >= 2, "--max-length must be >= 2 ([CLS] and [SEP]), got ", t_.max_length);
    require(t_.limit >= 0, "--limit must be >= 0, got ", t_.limit);
    require(t_.warmup_ratio >= 0 && t_.warmup_ratio <= 1, "--warmup-ratio must be in [0, 1], got ", t_.warmup_ratio);
    require(std::isfinite(t_.weight_decay) && t_.weight_decay >= 0, "--weight-decay must be >= 0, got ",
            t_.weight_decay);
    pipeline::bert_config_of(o_.model);  // unknown names fail before any work
    data_ = pipeline::load_text_splits(o_.dataset, t_.max_length, t_.limit);
    config_ = pipeline::bert_run_config(o_.model, "", data_);
    require(t_.max_length <= config_.max_position_embeddings, "--max-length ", t_.max_length,
            " exceeds the model's max_position_embeddings ", config_.max_position_embeddings);
    make_dir();
    note(data_.summary());
  }

  const data::TextSplits& data() const { return data_; }
  const TextOptions& text_options() const { return t_; }

  /// Trains the fp32 model (<dir>/fp32), keeps its best checkpoint's state (lowest validation
  /// loss) and returns that model's test accuracy.
  double train_fp32() {
    note("training fp32 " + o_.model + " for " + std::to_string(o_.epochs) + " epoch(s)");
    auto model = std::make_shared<Model>(config_, o_.seed);
    train::Trainer t(model, models::bert_forward(model), config("fp32", o_.epochs, o_.learning_rate, 42));
    t.fit(data_.train, data_.val);
    model->to(Device::cpu());  // the passes read and rewrite weights on the host
    auto best = std::make_shared<Model>(config_, o_.seed);
    train::load_checkpoint(t.best_checkpoint(), *best, nullptr);
    trained_ = best->state_dict();
    fp32_accuracy_ = test_accuracy(best);
    note("fp32 test accuracy " + fmt(fp32_accuracy_));
    return fp32_accuracy_;
  }

  /// Instead of train_fp32(): the starting model from `path` (a qnum checkpoint — its
  /// model_config sets the sizes, its structure the quantized layers, masks and identities —
  /// or a Hugging Face file with config.json beside it). Text tokenized another way than the
  /// checkpoint's is an error. Returns its test accuracy.
  double load_start(const std::string& path) {
    const auto meta = train::read_checkpoint_meta(path);
    pipeline::require_checkpoint_of(o_.model, path, meta);
    const auto here = pipeline::bert_metadata(config_, data_).value("tokenizer_fingerprint", std::string());
    const auto held = meta.value("tokenizer_fingerprint", std::string());
    qnum::detail::require(held.empty() || here.empty() || held == here, "checkpoint '", path,
                          "' was trained on text tokenized another way (tokenizer ", held, ", ", o_.dataset, "'s ",
                          here, "): give the --dataset it was trained on");
    config_ = meta.contains("model_config")
                  ? models::BertConfig::from_json(meta["model_config"], "checkpoint '" + path + "': model_config")
                  : pipeline::bert_run_config(o_.model, path, data_);
    auto m = std::make_shared<Model>(config_, o_.seed);
    pipeline::load_bert_weights(*m, path);
    structure_ = meta.value("structure", nlohmann::json(nullptr));
    trained_ = m->state_dict();
    fp32_accuracy_ = test_accuracy(m);
    note("loaded " + path + ": test accuracy " + fmt(fp32_accuracy_));
    return fp32_accuracy_;
  }

  /// A freshly initialised model of the lab's configuration (e.g. to check a pass's config
  /// before training).
  std::shared_ptr<Model> fresh_model() const { return std::make_shared<Model>(config_, o_.seed); }
  /// The lab's model configuration (the preset's, vocabulary from the tokenizer; a loaded
  /// checkpoint's after load_start).
  const models::BertConfig& model_config() const { return config_; }

  /// A fresh model of the same configuration (and loaded structure) holding the trained state.
  std::shared_ptr<Model> trained_copy() const {
    qnum::detail::require(!trained_.empty(), "internal: trained_copy() before train_fp32()");
    auto m = std::make_shared<Model>(config_, o_.seed);
    if (!structure_.is_null()) passes::restore_structure(*m, structure_);
    m->load_state_dict(trained_);
    return m;
  }

  /// Saves `model` as <dir>/<name>.safetensors (with its config.json beside it) for the next
  /// lab step, `qnum test` and `qnum predict`: its config (Hugging Face's keys; a NAS model's
  /// own, else the lab's), the tokenizer's fingerprint, the lab's recipe (max_length
  /// included) and `extra`.
  std::filesystem::path save_model(nn::Module& model, const std::string& name,
                                   const nlohmann::json& extra = nlohmann::json::object()) const {
    const auto* bert = dynamic_cast<const Model*>(&model);
    const models::BertConfig& bc = bert != nullptr ? bert->config : config_;
    write_file_atomic(dir_ / "config.json", bc.to_json().dump(2) + "\n");
    nlohmann::json meta = pipeline::bert_metadata(bc, data_);
    meta["config"] = train::to_json(config("", o_.epochs, o_.learning_rate, 42));
    for (const auto& [k, v] : extra.items()) meta[k] = v;
    return save_model_with(model, name, meta);
  }

  /// Trains `model` in place for `epochs` at `learning_rate` (run folder <dir>/<run>, its own
  /// warm-up and decay, batch order seeded by --seed and `batch_seed`) and returns the epochs'
  /// records; the model ends on the host as after the last epoch, for the caller to evaluate.
  std::vector<train::EpochRecord> train(const std::shared_ptr<Model>& model, const std::string& run, int epochs,
                                        double learning_rate, std::uint64_t batch_seed) const {
    train::Trainer t(model, models::bert_forward(model), config(run, epochs, learning_rate, batch_seed));
    auto records = t.fit(data_.train, data_.val);
    model->to(Device::cpu());
    return records;
  }

  /// Fine-tunes `model` in place for `epochs` (train(), at `learning_rate`, default the
  /// fine-tuning rate, with a batch order apart from the fp32 run's).
  std::vector<train::EpochRecord> finetune(const std::shared_ptr<Model>& model, const std::string& run, int epochs,
                                           double learning_rate = 0) const {
    if (epochs <= 0) return {};
    return train(model, run, epochs, learning_rate > 0 ? learning_rate : o_.finetune_learning_rate,
                 nn::detail::derive_seed(42, 1));
  }

  /// The recipe finetune() trains with at the fine-tuning rate, for a run folder `run`
  /// (absolute, or under <dir>) and `epochs`: what a search's per-trial fine-tuning (lab3) uses.
  train::TrainConfig finetune_config(const std::string& run, int epochs) const {
    return config(run, epochs, o_.finetune_learning_rate, nn::detail::derive_seed(42, 1));
  }

  /// Accuracy on the test split.
  double test_accuracy(const std::shared_ptr<Model>& model) const {
    return train::evaluate(*model, models::bert_forward(model), data_.test, eval_batch_size()).accuracy;
  }
  /// Accuracy on the validation split.
  double val_accuracy(const std::shared_ptr<Model>& model) const {
    return train::evaluate(*model, models::bert_forward(model), data_.val, eval_batch_size()).accuracy;
  }

  /// Runs `model` (eval mode, no gradients) on the first `batches` training batches in
  /// dataset order: the calibration of global activation pruning.
  void calibrate(Model& model, int batches) const {
    int n = 0;
    for (const data::Batch& b : data::batches(data_.train, {o_.batch_size, false, false, 0, 1})) {
      if (n++ == batches) break;
      model.forward(models::BertInput{b.batch_size, b.seq_len, b.input_ids, b.attention_mask, b.token_type_ids});
    }
  }

  /// Rows per evaluation batch.
  std::int64_t eval_batch_size() const { return std::max<std::int64_t>(o_.batch_size, 64); }

 private:
  /// The batch order of the fp32 run is seeded 42 (the HF Trainer's default seed, as
  /// `qnum train` does); --seed seeds the model's initialisation and random pruning.
  train::TrainConfig config(const std::string& run, int epochs, double lr, std::uint64_t batch_seed) const {
    train::TrainConfig c = pipeline::default_recipe(o_.model);
    c.model = o_.model;
    c.dataset = o_.dataset;
    c.max_epochs = epochs;
    c.batch_size = o_.batch_size;
    c.eval_batch_size = eval_batch_size();
    c.learning_rate = lr;
    c.weight_decay = t_.weight_decay;
    c.warmup_ratio = t_.warmup_ratio;
    c.max_length = t_.max_length;
    c.seed = nn::detail::derive_seed(o_.seed, batch_seed);
    c.threads = o_.threads;
    c.device = o_.device;
    c.output_dir = (dir_ / run).string();
    c.tensorboard_dir = run_tensorboard_dir(o_, dir_, c.output_dir);
    c.precision = o_.precision;
    c.progress = o_.progress;
    return c;
  }

  TextOptions t_;
  data::TextSplits data_;
  models::BertConfig config_;
  std::map<std::string, Tensor> trained_;
};

/// Runs `sweep` on the lab the options ask for: TextLab for BERT models, Lab for JSC ones.
template <class Sweep>
void with_lab(const std::string& program, const CLI::App& app, CommonOptions common, const TextOptions& text,
              Sweep&& sweep) {
  if (is_text_lab(common)) {
    apply_text_defaults(app, common);
    TextLab lab(program, common, text);
    sweep(lab);
  } else {
    for (const char* name : {"--max-length", "--limit", "--warmup-ratio", "--weight-decay"})
      qnum::detail::require(app.count(name) == 0, name, " applies to BERT models only, not to ", common.model);
    Lab lab(program, common);
    sweep(lab);
  }
}

}  // namespace qnum::labs
