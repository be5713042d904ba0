// What the Lab 2 programs (lab2-nas, lab2-compression) share: the text data, the NAS-BERT
// space (include/qnum/search/nas_bert.hpp) from the command line, one study per curve whose
// trials build a fresh randomly initialised BERT, train it with the Trainer and return
// its validation accuracy — optionally after compressing it (quantize + prune) and training
// it further —, the best trial of each curve measured on the test split, and the outputs:
// results.csv (trial, then one best-so-far column per curve), trials.csv (every trial:
// accuracy, parameters, architecture, state, Optuna parameters), plot.gp/plot.png.
//
// MASE's lab returns accuracy on IMDb's test split from every trial; qnum searches on the
// held-out validation split (10% of train) and reports the test accuracy of each curve's
// best trial only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../cli/bert_commands.hpp"
#include "lab_common.hpp"
#include "qnum/passes/pipeline.hpp"
#include "qnum/search/nas_bert.hpp"
#include "qnum/search/random_sampler.hpp"
#include "qnum/search/shuffled_grid_sampler.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"
#include "qnum/search/tpe.hpp"
#include "qnum/train/trainer.hpp"

namespace qnum::labs {

/// The options both Lab 2 programs take.
struct Lab2Options {
  std::string dataset = "text-synthetic";
  std::int64_t max_length = 128, limit = 0;
  int epochs = 1;
  std::int64_t batch_size = 8;
  double learning_rate = 5e-5;
  double warmup_ratio = 0, weight_decay = 0;
  std::uint64_t seed = 0, search_seed = 0;
  int trials = 8;
  int threads = 0;
  std::string device = "cpu";
  std::vector<std::string> samplers;
  std::vector<std::int64_t> layers{2, 4, 8}, heads{2, 4, 8, 16}, hidden{128, 192, 256, 384, 512},
      intermediate{512, 768, 1024, 1536, 2048};
  std::vector<std::string> linear_choices{"linear", "identity"};
  std::string storage = "memory";
  std::string output_dir;
  bool progress = true;
};

inline void add_lab2_options(CLI::App& app, Lab2Options& o) {
  app.add_option("--dataset", o.dataset, "text dataset: text-synthetic (offline) or imdb (QNUM_DATA_DIR)")
      ->capture_default_str();
  app.add_option("--max-length", o.max_length, "tokens per text incl. [CLS]/[SEP]")->capture_default_str();
  app.add_option("--limit", o.limit, "rows per split (0 = all), for quick runs")->capture_default_str();
  app.add_option("--epochs", o.epochs, "training epochs of every trial's model")->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "rows per training step")->capture_default_str();
  app.add_option("--learning-rate", o.learning_rate, "AdamW learning rate (linear decay per step)")
      ->capture_default_str();
  app.add_option("--warmup-ratio", o.warmup_ratio, "linear warm-up over this fraction of each trial's steps")
      ->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW's decoupled weight decay")->capture_default_str();
  app.add_option("--seed", o.seed, "seed of every trial's model initialisation and batch order")->capture_default_str();
  app.add_option("--search-seed", o.search_seed, "seed of the samplers")->capture_default_str();
  app.add_option("--trials", o.trials, "trials per curve")->capture_default_str();
  app.add_option("--threads", o.threads, "threads (default: all)");
  app.add_option("--device", o.device, "where each trial trains: cpu or cuda (a CUDA build)")->capture_default_str();
  app.add_option("--samplers", o.samplers, "samplers, one study each: grid, random, tpe")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--layers", o.layers, "num_hidden_layers choices")->delimiter(',')->capture_default_str();
  app.add_option("--heads", o.heads, "num_attention_heads choices")->delimiter(',')->capture_default_str();
  app.add_option("--hidden-sizes", o.hidden, "hidden_size choices")->delimiter(',')->capture_default_str();
  app.add_option("--intermediate-sizes", o.intermediate, "intermediate_size choices")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--linear-choices", o.linear_choices, "choices for every square Linear: linear, identity")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--storage", o.storage, "study storage: memory, sqlite:///file.db, postgresql://...")
      ->capture_default_str();
  app.add_option("--output-dir", o.output_dir, "where results.csv, trials.csv, plot.gp, plot.png and runs go");
  app.add_flag("!--no-progress", o.progress, "no per-step progress lines on stderr");
}

/// A Lab 2 run: the options checked, the data loaded, the space and the output folder.
class Lab2 {
 public:
  /// `curves`: the curve names; their studies ("<program>-<curve>") must not exist yet.
  Lab2(std::string program, Lab2Options o, const std::vector<std::string>& curves)
      : program_(std::move(program)), o_(std::move(o)) {
    using qnum::detail::require;
    require(o_.epochs >= 1, "--epochs must be >= 1, got ", o_.epochs);
    require(o_.batch_size >= 1, "--batch-size must be >= 1, got ", o_.batch_size);
    require(std::isfinite(o_.learning_rate) && o_.learning_rate > 0, "--learning-rate must be > 0, got ",
            o_.learning_rate);
    require(o_.warmup_ratio >= 0 && o_.warmup_ratio <= 1, "--warmup-ratio must be in [0, 1], got ", o_.warmup_ratio);
    require(std::isfinite(o_.weight_decay) && o_.weight_decay >= 0, "--weight-decay must be >= 0, got ",
            o_.weight_decay);
    require(o_.trials >= 1, "--trials must be >= 1, got ", o_.trials);
    require(o_.threads >= 0, "--threads must be >= 1, got ", o_.threads);
    require(o_.limit >= 0, "--limit must be >= 0, got ", o_.limit);
    require(o_.max_length >= 2 && o_.max_length <= 512, "--max-length must be in [2, 512] ([CLS] and [SEP]; ",
            "BERT's 512 positions), got ", o_.max_length);
    o_.samplers = sorted_unique(o_.samplers, "--samplers");
    for (const auto& s : o_.samplers)
      require(s == "tpe" || s == "random" || s == "grid", "--samplers: unknown sampler '", s,
              "' (allowed: grid, random, tpe)");
    {  // A bad URL or a study that exists fails before the data are read.
      const auto storage = search::open_storage(o_.storage);
      for (const auto& c : curves)
        require(!storage->find_study(program_ + "-" + c), "study '", program_ + "-" + c, "' already exists in ",
                storage->url(), "; use another --storage");
    }
    if (o_.threads > 0) set_num_threads(o_.threads);
    data_ = cli::detail::load_text_splits(o_.dataset, o_.max_length, o_.limit);
    models::BertConfig base = models::bert_config("bert-tiny");
    if (data_.tokenizer && data_.tokenizer->vocab_size() != base.vocab_size)
      base.vocab_size = data_.tokenizer->vocab_size();
    space_ = std::make_unique<search::NasBertSpace>(base, o_.layers, o_.heads, o_.hidden, o_.intermediate,
                                                    o_.linear_choices);
    dir_ = o_.output_dir.empty() ? std::filesystem::path("qnum-runs") / (program_ + "_" + o_.dataset)
                                 : std::filesystem::path(o_.output_dir);
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    require(!ec, "cannot create output directory '", dir_.string(), "': ", ec.message());
    note(data_.summary());
  }

  const Lab2Options& options() const { return o_; }
  const std::filesystem::path& dir() const { return dir_; }
  const data::TextSplits& data() const { return data_; }
  const search::NasBertSpace& space() const { return *space_; }
  const std::string& program() const { return program_; }

  void note(const std::string& line) const {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), line.c_str());
    std::fflush(stderr);
  }

  /// Trains `model` for `epochs` (run folder `run`, batch order from `seed`) and returns the
  /// validation accuracy after the last epoch. The run's checkpoints are removed afterwards
  /// (metrics.jsonl stays): a search writes one model per trial.
  double train(const std::shared_ptr<models::BertForSequenceClassification>& model, const std::filesystem::path& run,
               int epochs, std::uint64_t seed) const {
    train::TrainConfig c = train::text_recipe();
    c.model = "nas-bert";
    c.dataset = o_.dataset;
    c.max_epochs = epochs;
    c.batch_size = o_.batch_size;
    c.learning_rate = o_.learning_rate;
    c.warmup_ratio = o_.warmup_ratio;
    c.weight_decay = o_.weight_decay;
    c.max_length = o_.max_length;
    c.seed = seed;
    c.threads = o_.threads;
    c.device = o_.device;
    c.output_dir = run.string();
    c.progress = o_.progress;
    train::Trainer t(model, models::bert_forward(model), c);
    const auto records = t.fit(data_.train, data_.val);
    for (const char* f : {"best.safetensors", "best.json", "last.safetensors", "last.json"})
      std::filesystem::remove(run / f);
    return records.back().val_accuracy;
  }

  /// Accuracy of `model` on `split`.
  double accuracy(const std::shared_ptr<models::BertForSequenceClassification>& model,
                  const data::TokenDataset& split) const {
    return train::evaluate(*model, models::bert_forward(model), split, 64).accuracy;
  }

 private:
  std::string program_;
  Lab2Options o_;
  data::TextSplits data_;
  std::unique_ptr<search::NasBertSpace> space_;
  std::filesystem::path dir_;
};

/// What a trial does after building its model (the curve's variant).
struct Variant {
  std::string name;                        ///< curve name (results.csv column)
  std::string sampler;                     ///< grid, random, tpe
  std::optional<nlohmann::json> compress;  ///< quantize/prune after training (passes::compress)
  int post_epochs = 0;                     ///< training after compression (masks and formats kept)
};

/// One curve's outcome.
struct Lab2Curve {
  Variant variant;
  std::vector<double> best;  ///< best-so-far validation accuracy per finished trial (nan before any)
  std::int64_t best_number = -1;
  double best_val = std::nan(""), best_test = std::nan("");
  std::int64_t best_parameters = 0;
  std::string best_architecture;
  std::int64_t completed = 0, pruned = 0, failed = 0;
};

inline std::shared_ptr<search::Sampler> make_lab2_sampler(const std::string& name, const search::NasBertSpace& space,
                                                          std::uint64_t seed) {
  if (name == "tpe") return std::make_shared<search::TPESampler>(seed);
  if (name == "random") return std::make_shared<search::RandomSampler>(seed);
  if (name == "grid") return std::make_shared<search::ShuffledGridSampler>(space.grid(), seed);
  qnum::detail::fail("unknown sampler '", name, "' (allowed: grid, random, tpe)");
}

/// A short text of an architecture: L layers, A heads, H hidden, I intermediate, identities.
inline std::string architecture_text(const nlohmann::json& a) {
  return "L" + std::to_string(a["num_hidden_layers"].get<std::int64_t>()) + " A" +
         std::to_string(a["num_attention_heads"].get<std::int64_t>()) + " H" +
         std::to_string(a["hidden_size"].get<std::int64_t>()) + " I" +
         std::to_string(a["intermediate_size"].get<std::int64_t>()) + " identity " +
         std::to_string(a["identity"].size()) + "/" + std::to_string(a["square_linears"].get<std::int64_t>());
}

inline const char* lab2_trials_csv_header() {
  return "curve,sampler,trial,accuracy,parameters,layers,heads,hidden,intermediate,identity,square_linears,state,"
         "params\n";
}

/// Runs one curve: a study `<program>-<name>` maximizing the variant's validation accuracy;
/// appends every trial to `trials_csv`; measures the best trial's model on the test split.
inline Lab2Curve run_lab2_curve(const Lab2& lab, const Variant& v, std::string& trials_csv) {
  const auto& o = lab.options();
  Lab2Curve c;
  c.variant = v;
  auto storage = search::open_storage(o.storage);
  const std::string study_name = lab.program() + "-" + v.name;
  qnum::detail::require(!storage->find_study(study_name), "study '", study_name, "' already exists in ", storage->url(),
                        "; use another --storage");
  search::Study study(storage, study_name, {search::StudyDirection::maximize},
                      make_lab2_sampler(v.sampler, lab.space(), o.search_seed), nullptr, search::OpenMode::create);
  std::shared_ptr<models::BertForSequenceClassification> best_model;
  double best_value = -1;
  std::int64_t best_trial = -1;
  study.optimize(
      [&](search::Trial& t) {
        const auto choice = lab.space().sample(t);  // TrialPruned for non-divisible heads
        const auto arch = choice.to_json();
        t.set_user_attr("architecture", arch);
        auto model = search::NasBertSpace::build(choice, o.seed);
        t.set_user_attr("parameters", model->num_parameters());
        lab.note(v.name + " trial " + std::to_string(t.number()) + ": " + architecture_text(arch) + ", " +
                 std::to_string(model->num_parameters()) + " parameters");
        const auto run = lab.dir() / "trials" / (v.name + "-" + std::to_string(t.number()));
        double acc = lab.train(model, run, o.epochs, o.seed);
        t.set_user_attr("trained_accuracy", acc);
        if (v.compress) {
          const auto report = passes::compress(*model, *v.compress);
          if (report.prune) t.set_user_attr("weight_sparsity", report.prune->weight_sparsity());
          acc = lab.accuracy(model, lab.data().val);
          t.set_user_attr("compressed_accuracy", acc);
          if (v.post_epochs > 0)
            acc = lab.train(model, run / "post", v.post_epochs, nn::detail::derive_seed(o.seed, 1));
        }
        t.set_user_attr("accuracy", acc);
        if (acc > best_value) best_value = acc, best_model = model, best_trial = t.number();
        return acc;
      },
      o.trials);

  for (const auto& [n, b] : study.best_so_far()) c.best.push_back(b);
  for (const auto& t : study.get_trials()) {
    const bool ok = t.state == search::TrialState::complete;
    c.completed += ok;
    c.pruned += t.state == search::TrialState::pruned;
    c.failed += t.state == search::TrialState::fail;
    std::string params;
    for (const auto& [k, val] : t.params) {
      const auto ext = search::to_external(t.distributions.at(k), val);
      params += (params.empty() ? "" : " ") + k + "=" +
                (std::holds_alternative<std::string>(ext) ? std::get<std::string>(ext) : search::to_string(ext));
    }
    std::string arch_cells = ",,,,,";
    if (t.user_attrs.contains("architecture")) {
      const auto& a = t.user_attrs["architecture"];
      arch_cells = std::to_string(a["num_hidden_layers"].get<std::int64_t>()) + "," +
                   std::to_string(a["num_attention_heads"].get<std::int64_t>()) + "," +
                   std::to_string(a["hidden_size"].get<std::int64_t>()) + "," +
                   std::to_string(a["intermediate_size"].get<std::int64_t>()) + "," +
                   std::to_string(a["identity"].size()) + "," + std::to_string(a["square_linears"].get<std::int64_t>());
    }
    trials_csv += v.name + "," + v.sampler + "," + std::to_string(t.number) + "," +
                  (ok ? Lab::fmt(t.values[0], 6) : std::string("")) + "," +
                  (t.user_attrs.contains("parameters") ? std::to_string(t.user_attrs["parameters"].get<std::int64_t>())
                                                       : std::string("")) +
                  "," + arch_cells + "," + std::string(search::to_string(t.state)) + ",\"" + params + "\"\n";
  }
  if (c.completed == 0) {
    lab.note(v.name + " (" + v.sampler + "): no trial completed");
    return c;
  }
  const auto best = study.best_trial();
  c.best_number = best.number;
  c.best_val = best.values[0];
  c.best_parameters = best.user_attrs["parameters"].get<std::int64_t>();
  c.best_architecture = architecture_text(best.user_attrs["architecture"]);
  qnum::detail::require(best_model && best_trial == best.number, "internal: best model of curve ", v.name, " not kept");
  c.best_test = lab.accuracy(best_model, lab.data().test);
  lab.note(v.name + " (" + v.sampler + "): best validation accuracy " + Lab::fmt(c.best_val) + " at trial " +
           std::to_string(c.best_number) + " (" + c.best_architecture + "), test " + Lab::fmt(c.best_test));
  return c;
}

/// results.csv: trial, then each curve's best-so-far validation accuracy ("" before any).
inline std::string lab2_best_so_far_csv(const std::vector<Lab2Curve>& curves) {
  std::string csv = "trial";
  std::size_t n = 0;
  for (const auto& c : curves) csv += "," + c.variant.name, n = std::max(n, c.best.size());
  csv += "\n";
  for (std::size_t i = 0; i < n; ++i) {
    csv += std::to_string(i);
    for (const auto& c : curves)
      csv += "," + (i < c.best.size() && !std::isnan(c.best[i]) ? Lab::fmt(c.best[i], 6) : std::string(""));
    csv += "\n";
  }
  return csv;
}

/// The table printed on stdout.
inline void print_lab2_curves(const std::vector<Lab2Curve>& curves) {
  std::printf("%-22s %-7s %5s %5s %5s %6s %9s %9s %11s  %s\n", "curve", "sampler", "done", "prune", "fail", "best#",
              "val_acc", "test_acc", "parameters", "architecture");
  for (const auto& c : curves)
    std::printf("%-22s %-7s %5lld %5lld %5lld %6lld %9.4f %9.4f %11lld  %s\n", c.variant.name.c_str(),
                c.variant.sampler.c_str(), static_cast<long long>(c.completed), static_cast<long long>(c.pruned),
                static_cast<long long>(c.failed), static_cast<long long>(c.best_number), c.best_val, c.best_test,
                static_cast<long long>(c.best_parameters), c.best_architecture.c_str());
}

/// Writes trials.csv, results.csv, plot.gp and plot.png; prints the table and where they are.
inline void finish_lab2(const Lab2& lab, const std::vector<Lab2Curve>& curves, const std::string& trials_csv,
                        const std::string& title) {
  write_file_atomic(lab.dir() / "trials.csv", trials_csv);
  const auto plot = write_results(lab.dir(), lab2_best_so_far_csv(curves),
                                  best_so_far_script(lab.program() + ": best validation accuracy so far (results.csv)",
                                                     title, curves.size(), 0.5, "chance (2 classes)"),
                                  lab.program());
  const auto& o = lab.options();
  std::printf("%s  %s, %d epoch(s) per trial, %d trials per curve, %.3g architectures, seed %llu, search seed %llu\n\n",
              lab.program().c_str(), lab.data().summary().c_str(), o.epochs, o.trials, lab.space().architectures(),
              static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.search_seed));
  print_lab2_curves(curves);
  std::printf("\nresults  %s\ntrials   %s\n", (lab.dir() / "results.csv").string().c_str(),
              (lab.dir() / "trials.csv").string().c_str());
  std::printf("plot     %s\n",
              plot == PlotResult::written ? (lab.dir() / "plot.png").string().c_str() : "(not drawn: gnuplot missing)");
  if (o.storage != "memory") std::printf("studies  %s\n", o.storage.c_str());
}

}  // namespace qnum::labs
