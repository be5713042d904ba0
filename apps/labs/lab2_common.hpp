// What the Lab 2 programs (lab2-nas, lab2-compression) share: the lab base of the other labs
// (lab_common.hpp's options and lab_text.hpp's TextLab: the text data, the model's recipe
// from the registry, training, evaluation, checkpoints) plus the NAS-BERT space
// (include/qnum/search/nas_bert.hpp) from the command line, one study per curve whose trials
// build a fresh randomly initialised BERT, train it and return its validation accuracy —
// optionally after compressing it (quantize + prune) and training it further —, the best
// trial of each curve measured on the test split, the best trial over all curves kept as
// <dir>/best.safetensors (written whenever a trial beats it, so only the best so far is on
// disk), and the outputs: results.csv (trial, then one best-so-far column per curve),
// trials.csv (every trial: accuracy, parameters, architecture, state, Optuna parameters),
// plot.gp/plot.png.
//
// MASE's lab returns accuracy on IMDb's test split from every trial; qnum searches on the
// held-out validation split (10% of train) and reports the test accuracy of each curve's
// best trial only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab_text.hpp"
#include "qnum/passes/pipeline.hpp"
#include "qnum/search/nas_bert.hpp"
#include "qnum/search/samplers.hpp"
#include "qnum/search/storage_url.hpp"
#include "qnum/search/study.hpp"

namespace qnum::labs {

/// The samplers Lab 2 offers: the NAS space's grid is too large to list, so "grid" visits it
/// in a seeded order (search::ShuffledGridSampler).
inline const std::vector<std::string>& lab2_samplers() {
  static const std::vector<std::string> names{"grid", "random", "tpe"};
  return names;
}

/// The options only the Lab 2 searches take (the others are CommonOptions and TextOptions).
struct Lab2Options {
  std::uint64_t search_seed = 0;
  int trials = 8;
  std::vector<std::string> samplers;
  std::vector<std::int64_t> layers{2, 4, 8}, heads{2, 4, 8, 16}, hidden{128, 192, 256, 384, 512},
      intermediate{512, 768, 1024, 1536, 2048};
  std::vector<std::string> linear_choices{"linear", "identity"};
  std::string storage = "memory";
};

/// The search options' names (lab2-compression --load runs no search and refuses them).
inline std::vector<std::string> lab2_search_option_names() {
  return {"--search-seed",        "--trials",         "--samplers", "--layers", "--heads", "--hidden-sizes",
          "--intermediate-sizes", "--linear-choices", "--storage"};
}

/// Registers the common, text and search options; --model is the BERT whose vocabulary,
/// positions and labels the searched architectures keep (default bert-tiny).
inline void add_lab2_options(CLI::App& app, CommonOptions& common, TextOptions& text, Lab2Options& o) {
  common.model = "bert-tiny";
  add_common_options(app, common);
  add_text_options(app, text);
  app.get_option("--model")->description("BERT model giving what the search keeps (vocabulary, positions, labels)");
  app.get_option("--epochs")->description("training epochs of every trial's model (default: the model's recipe)");
  app.get_option("--output-dir")->description("where results.csv, trials.csv, plots, runs and best.safetensors go");
  app.add_option("--search-seed", o.search_seed, "seed of the samplers")->capture_default_str();
  app.add_option("--trials", o.trials, "trials per curve")->capture_default_str();
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
}

/// `common` with the model's recipe for what the command line did not set (apply_text_defaults).
inline CommonOptions with_text_defaults(const CLI::App& app, CommonOptions common) {
  qnum::detail::require(pipeline::model_spec(common.model).input == pipeline::InputKind::tokens, "--model: '", common.model,
                        "' is not a text model; Lab 2 searches BERT architectures");
  apply_text_defaults(app, common);
  return common;
}

/// A Lab 2 search: the options checked, the text lab (data, recipe, output folder) and the space.
class Lab2 {
 public:
  using Model = TextLab::Model;

  /// `curves`: the curve names; their studies ("<program>-<curve>") must not exist yet. Bad
  /// options, a bad storage URL or an existing study fail before the data are read.
  Lab2(std::string program, const CLI::App& app, CommonOptions common, const TextOptions& text, Lab2Options o,
       const std::vector<std::string>& curves)
      : program_(std::move(program)),
        o_(checked(program_, std::move(o), curves)),
        lab_(program_, with_text_defaults(app, std::move(common)), text),
        space_(lab_.model_config(), o_.layers, o_.heads, o_.hidden, o_.intermediate, o_.linear_choices) {}

  const Lab2Options& options() const { return o_; }
  const TextLab& lab() const { return lab_; }
  const search::NasBertSpace& space() const { return space_; }
  const std::string& program() const { return program_; }
  void note(const std::string& line) const { lab_.note(line); }

  /// Trains a trial's fresh model for --epochs (run folder <dir>/<run>) and returns its
  /// validation accuracy after the last epoch. The run's checkpoints are removed afterwards
  /// (metrics.jsonl stays): the best model is kept by offer_best().
  double train(const std::shared_ptr<Model>& model, const std::string& run) const {
    return drop_checkpoints(run, lab_.train(model, run, lab_.options().epochs, lab_.options().learning_rate, 42));
  }
  /// Trains a compressed model further for `epochs` at the fine-tuning rate (masks and
  /// formats kept: QAT); its validation accuracy after the last epoch.
  double post_train(const std::shared_ptr<Model>& model, const std::string& run, int epochs) const {
    return drop_checkpoints(run, lab_.finetune(model, run, epochs));
  }

  /// Keeps `model` as <dir>/best.safetensors when `val_accuracy` beats every model offered
  /// before (ties: the earlier); `about` (curve, trial, architecture) goes into its metadata.
  void offer_best(Model& model, double val_accuracy, nlohmann::json about) {
    if (!(val_accuracy > best_val_)) return;
    best_val_ = val_accuracy;
    about["val_accuracy"] = val_accuracy;
    best_file_ = lab_.save_model(model, "best", {{program_, about}});
  }
  /// The file offer_best() wrote ("" before any).
  const std::filesystem::path& best_file() const { return best_file_; }

 private:
  static Lab2Options checked(const std::string& program, Lab2Options o, const std::vector<std::string>& curves) {
    using qnum::detail::require;
    require(o.trials >= 1, "--trials must be >= 1, got ", o.trials);
    o.samplers = sorted_unique(o.samplers, "--samplers");
    for (const auto& s : o.samplers) search::require_sampler_name(s, lab2_samplers(), "--samplers");
    search::NasBertSpace(models::BertConfig{}, o.layers, o.heads, o.hidden, o.intermediate, o.linear_choices);
    const auto storage = search::open_storage(o.storage);
    for (const auto& c : curves)
      require(!storage->find_study(program + "-" + c), "study '", program + "-" + c, "' already exists in ",
              storage->url(), "; use another --storage");
    return o;
  }

  double drop_checkpoints(const std::string& run, const std::vector<train::EpochRecord>& records) const {
    for (const char* f : {"best.safetensors", "best.json", "last.safetensors", "last.json"})
      std::filesystem::remove(lab_.dir() / run / f);
    return records.back().val_accuracy;
  }

  std::string program_;
  Lab2Options o_;
  TextLab lab_;
  search::NasBertSpace space_;
  double best_val_ = -1;
  std::filesystem::path best_file_;
};

/// Applies a compress config (passes::compress: quantize, then prune) to `model`; global
/// activation pruning calibrates on the first training batches.
inline passes::CompressReport compress_model(const TextLab& lab, TextLab::Model& model, const nlohmann::json& config) {
  return passes::compress(model, config, [&] { lab.calibrate(model, 4); });
}

/// What a trial does after building its model (the curve's variant).
struct Variant {
  std::string name;                        ///< curve name (results.csv column)
  std::string sampler;                     ///< grid, random, tpe
  std::optional<nlohmann::json> compress;  ///< quantize/prune after training (passes::compress)
  int post_epochs = 0;                     ///< training after compression (masks and formats kept)
  bool keep = true;                        ///< its models compete for <dir>/best
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
  search::SamplerOptions so;
  so.seed = seed;
  so.grid = space.grid();
  so.shuffle_grid = true;
  so.offered = lab2_samplers();
  return search::make_sampler(name, so);
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
/// appends every trial to `trials_csv`; offers every trial's model for <dir>/best (when the
/// variant keeps); measures the curve's best model on the test split.
inline Lab2Curve run_lab2_curve(Lab2& lab, const Variant& v, std::string& trials_csv) {
  const auto& o = lab.options();
  Lab2Curve c;
  c.variant = v;
  auto storage = search::open_storage(o.storage);
  const std::string study_name = lab.program() + "-" + v.name;
  qnum::detail::require(!storage->find_study(study_name), "study '", study_name, "' already exists in ", storage->url(),
                        "; use another --storage");
  search::Study study(storage, study_name, {search::StudyDirection::maximize},
                      make_lab2_sampler(v.sampler, lab.space(), o.search_seed), nullptr, search::OpenMode::create);
  std::shared_ptr<Lab2::Model> best_model;
  double best_value = -1;
  std::int64_t best_trial = -1;
  study.optimize(
      [&](search::Trial& t) {
        const auto choice = lab.space().sample(t);  // TrialPruned for non-divisible heads
        const auto arch = choice.to_json();
        t.set_user_attr("architecture", arch);
        auto model = search::NasBertSpace::build(choice, lab.lab().options().seed);
        t.set_user_attr("parameters", model->num_parameters());
        lab.note(v.name + " trial " + std::to_string(t.number()) + ": " + architecture_text(arch) + ", " +
                 std::to_string(model->num_parameters()) + " parameters");
        const std::string run = "trials/" + v.name + "-" + std::to_string(t.number());
        double acc = lab.train(model, run);
        t.set_user_attr("trained_accuracy", acc);
        if (v.compress) {
          const auto report = compress_model(lab.lab(), *model, *v.compress);
          if (report.prune) t.set_user_attr("weight_sparsity", report.prune->weight_sparsity());
          acc = lab.lab().val_accuracy(model);
          t.set_user_attr("compressed_accuracy", acc);
          if (v.post_epochs > 0) acc = lab.post_train(model, run + "/post", v.post_epochs);
        }
        t.set_user_attr("accuracy", acc);
        if (v.keep) lab.offer_best(*model, acc, {{"curve", v.name}, {"trial", t.number()}, {"architecture", arch}});
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
                  (ok ? LabBase::fmt(t.values[0], 6) : std::string("")) + "," +
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
  c.best_test = lab.lab().test_accuracy(best_model);
  lab.note(v.name + " (" + v.sampler + "): best validation accuracy " + LabBase::fmt(c.best_val) + " at trial " +
           std::to_string(c.best_number) + " (" + c.best_architecture + "), test " + LabBase::fmt(c.best_test));
  return c;
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

/// Writes trials.csv, results.csv, plot.gp and plot.png; prints the table, the kept best
/// model (the first curve with the highest validation accuracy among those that keep) and
/// where everything is.
inline void finish_lab2(const Lab2& lab, const std::vector<Lab2Curve>& curves, const std::string& trials_csv,
                        const std::string& title) {
  const auto& dir = lab.lab().dir();
  write_file_atomic(dir / "trials.csv", trials_csv);
  const auto plot = write_results(dir, best_so_far_csv(curves, [](const Lab2Curve& c) { return c.variant.name; }),
                                  best_so_far_script(lab.program() + ": best validation accuracy so far (results.csv)",
                                                     title, curves.size(), 0.5, "chance (2 classes)"),
                                  lab.program());
  const auto& o = lab.options();
  const auto& c = lab.lab().options();
  std::printf("%s  %s, %d epoch(s) per trial, %d trials per curve, %.3g architectures, seed %llu, search seed %llu\n\n",
              lab.program().c_str(), lab.lab().data().summary().c_str(), c.epochs, o.trials,
              lab.space().architectures(), static_cast<unsigned long long>(c.seed),
              static_cast<unsigned long long>(o.search_seed));
  print_lab2_curves(curves);
  const Lab2Curve* best = nullptr;
  for (const auto& k : curves)
    if (k.variant.keep && k.completed > 0 && (!best || k.best_val > best->best_val)) best = &k;
  std::printf("\nresults  %s\ntrials   %s\n", (dir / "results.csv").string().c_str(),
              (dir / "trials.csv").string().c_str());
  std::printf("plot     %s\n",
              plot == PlotResult::written ? (dir / "plot.png").string().c_str() : "(not drawn: gnuplot missing)");
  if (best)
    std::printf("best     %s (%s trial %lld, validation accuracy %.4f, test accuracy %.4f)\n",
                lab.best_file().string().c_str(), best->variant.name.c_str(), static_cast<long long>(best->best_number),
                best->best_val, best->best_test);
  if (o.storage != "memory") std::printf("studies  %s\n", o.storage.c_str());
}

}  // namespace qnum::labs
